package ipam

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/peerlink/peerlink/internal/cidr"
)

func assign(t *testing.T, l *Ledger, owner string, wants ...string) []string {
	t.Helper()
	got, err := l.Assign(owner, cidr.MustPrefixes(wants...))
	if err != nil {
		t.Fatalf("Assign(%s, %v): %v", owner, wants, err)
	}
	out := make([]string, len(got))
	for i, p := range got {
		out[i] = p.String()
	}
	return out
}

// checkAssign assigns the CIDRs wants to owner and fails t unless they get
// the ranges want, in order.
func checkAssign(t *testing.T, l *Ledger, owner string, wants, want []string) {
	t.Helper()
	if got := assign(t, l, owner, wants...); !slices.Equal(got, want) {
		t.Errorf("Assign(%s, %v) = %v, want %v", owner, wants, got, want)
	}
}

func TestLedgerAssignKeepsUnchangedEntries(t *testing.T) {
	l := NewLedger(newAllocator(t, DefaultPools(), localRanges()))
	checkAssign(t, l, "a", []string{"10.244.0.0/16", "10.70.0.0/16"}, []string{"10.0.0.0/16", "10.1.0.0/16"})
	checkAssign(t, l, "b", []string{"10.244.0.0/16"}, []string{"10.2.0.0/16"})
	// Same wants again, reordered: nothing moves.
	checkAssign(t, l, "a", []string{"10.70.0.0/16", "10.244.0.0/16"}, []string{"10.1.0.0/16", "10.0.0.0/16"})
	// The external CIDR is replaced: its range is released first and so
	// given to the replacement; the pod CIDR keeps its range.
	checkAssign(t, l, "a", []string{"10.244.0.0/16", "10.71.0.0/16"}, []string{"10.0.0.0/16", "10.71.0.0/16"})
	checkAssign(t, l, "a", []string{"10.244.0.0/16", "10.80.0.0/16"}, []string{"10.0.0.0/16", "10.1.0.0/16"})
	// b's range is untouched by a's changes.
	checkAssign(t, l, "b", []string{"10.244.0.0/16"}, []string{"10.2.0.0/16"})
}

// TestLedgerDualStack: the IPv4 and IPv6 ranges of one peer are remapped
// each in its own family, independently: one family's collision, change or
// exhaustion does not move the other's range.
func TestLedgerDualStack(t *testing.T) {
	l := NewLedger(newPlanned(t, PoolsOrDefault(nil), testPlan(), slices.Concat(localRanges(), localRanges6())))
	// Both collide with the local pod ranges.
	checkAssign(t, l, "a", []string{"10.244.0.0/16", "fd44:1::/48"}, []string{"10.0.0.0/16", "fd00::/48"})
	// Only the IPv6 one collides: the IPv4 one is kept.
	checkAssign(t, l, "b", []string{"10.245.0.0/16", "fd44:1::/48"}, []string{"10.245.0.0/16", "fd00:0:1::/48"})
	// Only the IPv4 one collides, with a's range and the IPv6 one is free.
	checkAssign(t, l, "c", []string{"10.0.0.0/16", "fd44:3::/48"}, []string{"10.1.0.0/16", "fd44:3::/48"})
	// a changes its IPv6 range only: its IPv4 range stays, and the /56 gets
	// the start of the /48 a held before.
	checkAssign(t, l, "a", []string{"10.244.0.0/16", "fd44:1::/56"}, []string{"10.0.0.0/16", "fd00::/56"})
	// IPv6-only; the /64 goes after a's /56.
	checkAssign(t, l, "d", []string{"fd44:1::/48", "fd44:3::/64"}, []string{"fd00:0:2::/48", "fd00:0:0:100::/64"})
}

func TestLedgerReleaseAndFailure(t *testing.T) {
	l := NewLedger(newAllocator(t, cidr.MustPrefixes("10.0.0.0/15"), localRanges()))
	assign(t, l, "a", "10.244.0.0/16")
	checkAssign(t, l, "b", []string{"10.244.0.0/16"}, []string{"10.1.0.0/16"})
	// c asks for two colliding /16s with one left: it gets none, and the
	// one it got first is free again.
	if got, err := l.Assign("c", cidr.MustPrefixes("10.244.0.0/16", "10.70.0.0/16")); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Assign(c) = %v, %v; want ErrExhausted", got, err)
	}
	l.Release("a")
	checkAssign(t, l, "d", []string{"10.70.0.0/16"}, []string{"10.0.0.0/16"})
	// b loses its range when its only entry fails.
	if got, err := l.Assign("b", cidr.MustPrefixes("10.244.0.0/16", "10.80.0.0/16")); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Assign(b) = %v, %v; want ErrExhausted", got, err)
	}
	// e gets the range b held: b holds nothing after its failure.
	checkAssign(t, l, "e", []string{"10.80.0.0/16"}, []string{"10.1.0.0/16"})
}

func TestLedgerRestore(t *testing.T) {
	l := NewLedger(newAllocator(t, DefaultPools(), localRanges()))
	kept := l.Restore("a", []Entry{
		{Want: pfx("10.244.0.0/16"), Got: pfx("10.5.0.0/16")},
		{Want: pfx("10.70.0.0/16"), Got: pfx("10.96.0.0/16")}, // on the service CIDR: dropped
		{Got: pfx("10.6.0.0/16")},                             // no longer declared: held until Assign
	})
	if len(kept) != 2 || kept[0].Got != pfx("10.5.0.0/16") || kept[1].Got != pfx("10.6.0.0/16") {
		t.Fatalf("Restore kept %v", kept)
	}
	// Overlaps a's first range: dropped.
	if kept := l.Restore("b", []Entry{{Want: pfx("10.244.0.0/16"), Got: pfx("10.5.0.0/17")}}); len(kept) != 0 {
		t.Errorf("Restore(b) kept %v, want nothing", kept)
	}
	checkAssign(t, l, "b", []string{"10.244.0.0/16"}, []string{"10.0.0.0/16"})
	// a keeps its restored pod range, gets a new external one, and the
	// range of the CIDR it no longer declares is released.
	checkAssign(t, l, "a", []string{"10.244.0.0/16", "10.70.0.0/16"}, []string{"10.5.0.0/16", "10.1.0.0/16"})
	checkAssign(t, l, "c", []string{"10.6.0.0/16"}, []string{"10.6.0.0/16"})
	// Restoring replaces what the owner held.
	l.Restore("a", []Entry{{Want: pfx("10.244.0.0/16"), Got: pfx("10.7.0.0/16")}})
	if err := l.alloc.Claim(netip.MustParsePrefix("10.5.0.0/16")); err != nil {
		t.Errorf("a's earlier range is still taken after Restore replaced it: %v", err)
	}
}

// TestLedgerRestoreOutsideThePlan: a range recorded as kept as it is
// outside today's plan (the default's before there was one, say) is not
// held again; its owner's CIDR is remapped at its next Assign.
func TestLedgerRestoreOutsideThePlan(t *testing.T) {
	l := NewLedger(newPlanned(t, DefaultPools(), nil, localRanges()))
	kept := l.Restore("a", []Entry{
		{Want: pfx("100.64.0.0/16"), Got: pfx("100.64.0.0/16")},
		{Want: pfx("10.244.0.0/16"), Got: pfx("10.0.0.0/16")},
	})
	if len(kept) != 1 || kept[0].Got != pfx("10.0.0.0/16") {
		t.Fatalf("Restore kept %v, want the pool's block alone", kept)
	}
	checkAssign(t, l, "a", []string{"10.244.0.0/16", "100.64.0.0/16"}, []string{"10.0.0.0/16", "10.1.0.0/16"})
}

func TestLedgerRebase(t *testing.T) {
	l := NewLedger(newAllocator(t, DefaultPools(), localRanges()))
	assign(t, l, "a", "10.244.0.0/16", "10.250.0.0/16") // 10.0.0.0/16 and kept
	assign(t, l, "b", "192.168.5.0/24")                 // kept
	assign(t, l, "c", "10.244.0.0/16")                  // 10.1.0.0/16

	// A node appears at 10.250.3.4 and a load balancer at 10.1.0.9: the
	// ranges holding them go, the others stay.
	taken := append(localRanges(), cidr.MustPrefixes("10.250.3.4/32", "10.1.0.9/32")...)
	lost := l.Rebase(newAllocator(t, DefaultPools(), taken))
	if want := []string{"a", "c"}; !slices.Equal(lost, want) {
		t.Fatalf("Rebase lost %v, want %v", lost, want)
	}
	checkAssign(t, l, "b", []string{"192.168.5.0/24"}, []string{"192.168.5.0/24"})
	// a keeps its pod range; its other CIDR, kept as is until now, holds
	// the node and is remapped to the first free block; c's range held
	// the load balancer and moves too.
	checkAssign(t, l, "a", []string{"10.244.0.0/16", "10.250.0.0/16"}, []string{"10.0.0.0/16", "10.2.0.0/16"})
	checkAssign(t, l, "c", []string{"10.244.0.0/16"}, []string{"10.3.0.0/16"})
	// The reservations go away again: nothing moves back, nothing is lost.
	if lost := l.Rebase(newAllocator(t, DefaultPools(), localRanges())); len(lost) != 0 {
		t.Errorf("Rebase to fewer taken ranges lost %v", lost)
	}
	checkAssign(t, l, "a", []string{"10.244.0.0/16", "10.250.0.0/16"}, []string{"10.0.0.0/16", "10.2.0.0/16"})
}

func TestRemoteStatus(t *testing.T) {
	got := RemoteStatus(2, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("10.0.1.0/24"), netip.MustParsePrefix("10.0.2.0/24"),
	})
	if len(got.CIDR.Pod) != 2 || got.CIDR.Pod[1] != "10.0.1.0/24" || len(got.CIDR.External) != 1 || got.CIDR.External[0] != "10.0.2.0/24" {
		t.Errorf("RemoteStatus = %+v", got.CIDR)
	}
	if got := RemoteStatus(1, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}); got.CIDR.External != nil {
		t.Errorf("no external CIDR laid out as %v, want nil", got.CIDR.External)
	}
}
