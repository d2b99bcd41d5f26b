package ipam

import (
	"maps"
	"net/netip"
	"slices"
)

// Entry pairs a peer's CIDR with the range this cluster sees it under.
type Entry struct {
	// Want is the peer's real CIDR; the zero Prefix when it is not known, as
	// for a range recorded for a CIDR the peer no longer declares.
	Want netip.Prefix
	// Got is the range handed out for Want.
	Got netip.Prefix
}

// Ledger records which owner (a Configuration, for the reconciler) holds
// which ranges of an Allocator, so that an owner's changed list of CIDRs
// keeps the ranges of its unchanged entries. Like the Allocator it is pure
// and not safe for concurrent use.
type Ledger struct {
	alloc  *Allocator
	owners map[string][]Entry
}

// NewLedger returns an empty Ledger over a. The Ledger must be the only user
// of a from then on.
func NewLedger(a *Allocator) *Ledger {
	return &Ledger{alloc: a, owners: make(map[string][]Entry)}
}

// Restore records entries handed out before (read back from where they were
// persisted) as held by owner, replacing what owner held. An entry whose
// range is invalid or overlaps a range already taken is dropped: the owner
// gets a new range for it at its next Assign. Restore returns the entries
// kept. Owners restored in the same order get the same result.
func (l *Ledger) Restore(owner string, entries []Entry) []Entry {
	l.Release(owner)
	var kept []Entry
	for _, e := range entries {
		if l.alloc.Claim(e.Got) == nil {
			kept = append(kept, e)
		}
	}
	if len(kept) > 0 {
		l.owners[owner] = kept
	}
	return kept
}

// Assign makes owner hold one range for each of wants, returned in the same
// order. An entry whose Want appears again keeps its range; the others are
// released before the new wants are allocated, so a replaced CIDR may get its
// predecessor's range back. On error owner holds nothing, so a range is
// never held for an owner that cannot use all of its ranges.
func (l *Ledger) Assign(owner string, wants []netip.Prefix) ([]netip.Prefix, error) {
	old := l.owners[owner]
	used := make([]bool, len(old))
	got := make([]netip.Prefix, len(wants))
	for i, w := range wants {
		for k, e := range old {
			if !used[k] && e.Want == w {
				used[k], got[i] = true, e.Got
				break
			}
		}
	}
	for k, e := range old {
		if !used[k] {
			// old holds only ranges the Allocator handed out, so this
			// cannot fail.
			_ = l.alloc.Release(e.Got)
		}
	}
	held := make([]Entry, 0, len(wants))
	for i, w := range wants {
		if got[i].IsValid() {
			held = append(held, Entry{Want: w, Got: got[i]})
		}
	}
	l.owners[owner] = held
	for i, w := range wants {
		if got[i].IsValid() {
			continue
		}
		p, err := l.alloc.Allocate(w)
		if err != nil {
			l.Release(owner)
			return nil, err
		}
		got[i] = p
		l.owners[owner] = append(l.owners[owner], Entry{Want: w, Got: p})
	}
	return got, nil
}

// Release frees every range owner holds.
func (l *Ledger) Release(owner string) {
	for _, e := range l.owners[owner] {
		// Only ranges the Allocator handed out are recorded.
		_ = l.alloc.Release(e.Got)
	}
	delete(l.owners, owner)
}

// Rebase moves every owner's ranges onto a, an Allocator with different
// taken ranges (a node address that appeared, say), and makes the Ledger
// use a from then on. An entry whose range a no longer has free is dropped,
// as Restore drops it: its owner gets a new range at its next Assign.
// Rebase returns the owners that lost an entry, sorted. Entries of
// different owners never overlap, so the result does not depend on the
// order owners are visited in.
func (l *Ledger) Rebase(a *Allocator) []string {
	l.alloc = a
	var lost []string
	for _, owner := range slices.Sorted(maps.Keys(l.owners)) {
		entries := l.owners[owner]
		kept := entries[:0]
		for _, e := range entries {
			if a.Claim(e.Got) == nil {
				kept = append(kept, e)
			}
		}
		if len(kept) != len(entries) {
			lost = append(lost, owner)
		}
		if len(kept) == 0 {
			delete(l.owners, owner)
		} else {
			l.owners[owner] = kept
		}
	}
	return lost
}
