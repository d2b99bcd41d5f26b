package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/peerlink/peerlink/dataplane/nat"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

const (
	// foreignChains is the number of chains of another table beside the
	// fabric's: what kube-proxy's iptables mode (through iptables-nft)
	// holds for about 50,000 endpoints, one chain per endpoint and per
	// Service.
	foreignChains = 100000
	// checkRounds is how many times each case is measured, taking turns;
	// checksPerRound is the number of checks timed in one round.
	checkRounds, checksPerRound = 5, 20
	// checkFlatGoal is the ceiling of a check's time beside foreignChains
	// chains as a multiple of its time beside none.
	checkFlatGoal = 1.5
)

// nftablesTable measures what a fabric agent's sync costs on a node where
// another program holds a large nftables ruleset: the time to compare the
// kernel's table with the fabric's plan for 100 peers, unchanged, beside
// foreignChains chains of another table, and beside none. The agent does
// this at every sync; it must not read what is not its own.
func nftablesTable(_ context.Context) (*table, error) {
	if err := netns.Privileged(); err != nil {
		return nil, fmt.Errorf("nftables table: %w (run `make bench` as root)", err)
	}
	p, err := fabricPlanFor(100)
	if err != nil {
		return nil, err
	}
	ns, err := netns.Create("bench-nft")
	if err != nil {
		return nil, err
	}
	defer ns.Delete()
	a, err := nat.NewApplier(ns.Handle)
	if err != nil {
		return nil, err
	}
	if _, err := a.Apply(p.NAT); err != nil {
		return nil, err
	}
	foreign, err := foreignRuleset()
	if err != nil {
		return nil, err
	}
	defer os.Remove(foreign)
	check := func() (time.Duration, error) {
		start := time.Now()
		for range checksPerRound {
			changed, err := a.Apply(p.NAT)
			if err != nil {
				return 0, err
			}
			if changed {
				return 0, fmt.Errorf("the fabric's table %s was written again: it was expected unchanged", p.NAT.Table)
			}
		}
		return time.Since(start) / checksPerRound, nil
	}
	var alone, beside []float64
	for range checkRounds {
		d, err := check()
		if err != nil {
			return nil, err
		}
		alone = append(alone, d.Seconds())
		if _, err := ns.Run("nft", "-f", foreign); err != nil {
			return nil, err
		}
		if d, err = check(); err != nil {
			return nil, err
		}
		beside = append(beside, d.Seconds())
		if _, err := ns.Run("nft", "delete", "table", "ip", "foreign"); err != nil {
			return nil, err
		}
	}
	ms := func(vs []float64) float64 { return 1000 * medianOf(vs) }
	return &table{
		title: "A fabric sync on a busy node: its nftables table compared with the plan, unchanged",
		rows: []row{
			{name: fmt.Sprintf("beside %s chains of another table (ceiling: %.1f x beside none)", number(foreignChains), checkFlatGoal),
				measured: medianRatio(beside, alone), goal: checkFlatGoal, unit: "x", dir: atMost},
		},
		notes: []string{
			fmt.Sprintf("the fabric's plan for 100 peers (%d chains, %d sets and maps); medians of %d rounds of %d checks, the two cases taking turns: beside none %.2f ms, beside %s chains %.2f ms a check",
				len(p.NAT.Chains), len(p.NAT.Sets)+len(p.NAT.Maps), checkRounds, checksPerRound, ms(alone), number(foreignChains), ms(beside)),
			"the other table stands for kube-proxy's in iptables mode, whose iptables-nft makes a chain per Service and per endpoint",
		},
	}, nil
}

// foreignRuleset writes an nft script of a table "foreign" with
// foreignChains empty chains, and returns its path.
func foreignRuleset() (string, error) {
	var b strings.Builder
	b.WriteString("table ip foreign {\n")
	for i := range foreignChains {
		fmt.Fprintf(&b, "\tchain c%d {\n\t}\n", i)
	}
	b.WriteString("}\n")
	path := filepath.Join(os.TempDir(), fmt.Sprintf("peerlink-bench-foreign-%d.nft", os.Getpid()))
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}
