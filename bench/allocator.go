package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/peerlink/peerlink/ipam"
)

// allocatorGoal is the floor of allocator operations per second: a
// controller reconciling 1,000 peers should spend no noticeable time in it.
const allocatorGoal = 100_000

// allocatorTable measures the IPAM allocator, with every peer declaring the
// pod and external CIDRs of this cluster, so that every range is remapped.
func allocatorTable(_ context.Context) (*table, error) {
	t := &table{title: "IPAM allocator (every peer collides with the local ranges, all remapped)"}
	local := []netip.Prefix{
		netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/12"),
		netip.MustParsePrefix("10.70.0.0/16"), netip.MustParsePrefix("10.80.0.0/16"),
	}
	wants := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24"), netip.MustParsePrefix("10.70.0.0/24")}

	for _, peers := range []int{1_000, 10_000} {
		a, err := ipam.New(ipam.DefaultPools(), local)
		if err != nil {
			return nil, err
		}
		l := ipam.NewLedger(a)
		start := time.Now()
		for i := range peers {
			if _, err := l.Assign(fmt.Sprint("peer-", i), wants); err != nil {
				return nil, fmt.Errorf("assign peer %d: %w", i, err)
			}
		}
		fill := time.Since(start)
		t.rows = append(t.rows, row{
			name:     fmt.Sprintf("allocations while filling to %s peers", number(float64(peers))),
			measured: float64(2*peers) / fill.Seconds(), goal: allocatorGoal, unit: "ops/s", dir: atLeast,
		})

		// Churn: one peer leaves, one comes, with the others held. The
		// leaving peer is spread over the whole range so that holes appear
		// everywhere.
		const rounds = 20_000
		start = time.Now()
		for i := range rounds {
			owner := fmt.Sprint("peer-", (i*7919)%peers)
			l.Release(owner)
			if _, err := l.Assign(owner, wants); err != nil {
				return nil, fmt.Errorf("churn round %d: %w", i, err)
			}
		}
		churn := time.Since(start)
		t.rows = append(t.rows, row{
			name:     fmt.Sprintf("release + allocate with %s peers held", number(float64(peers))),
			measured: float64(rounds*4) / churn.Seconds(), goal: allocatorGoal, unit: "ops/s", dir: atLeast,
		})
	}
	t.notes = []string{"an operation is one range allocated or released; each peer holds a /24 pod and a /24 external range"}
	return t, nil
}
