package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// tables lists the benchmark tables in the order they are printed. A new
// table is a function in a file of its own, added here.
func tables() []func(ctx context.Context) (*table, error) {
	return []func(ctx context.Context) (*table, error){
		allocatorTable,
		controlPlaneTable,
		dataplaneTable,
		labTable,
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed := false
	for _, run := range tables() {
		t, err := run(ctx)
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
