package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// tables lists the benchmark tables by name, in the order they are
// printed. A new table is a function in a file of its own, added here.
func tables() []namedTable {
	return []namedTable{
		{"allocator", allocatorTable},
		{"controlplane", controlPlaneTable},
		{"peering", peeringTable},
		{"nftables", nftablesTable},
		{"dataplane", dataplaneTable},
		{"lab", labTable},
		{"mesh", meshTable},
	}
}

// namedTable is a table and the name -only selects it by.
type namedTable struct {
	name string
	run  func(ctx context.Context) (*table, error)
}

// selectTables returns the tables named in only (comma-separated), all of
// them when only is empty.
func selectTables(all []namedTable, only string) ([]namedTable, error) {
	if only == "" {
		return all, nil
	}
	var out []namedTable
	var names []string
	for _, t := range all {
		names = append(names, t.name)
	}
	for _, want := range strings.Split(only, ",") {
		i := slices.IndexFunc(all, func(t namedTable) bool { return t.name == strings.TrimSpace(want) })
		if i < 0 {
			return nil, fmt.Errorf("-only %q: no table %q (tables: %s)", only, want, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

func main() {
	only := flag.String("only", "", "comma-separated names of the tables to print (allocator, controlplane, peering, nftables, dataplane, lab, mesh); empty: all")
	flag.Parse()
	// The test control planes log through controller-runtime; their errors
	// reach the tables as returned errors.
	ctrllog.SetLogger(logr.Discard())
	selected, err := selectTables(tables(), *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed := false
	for _, sel := range selected {
		t, err := sel.run(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			failed = true
			continue
		}
		if err := t.print(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}
