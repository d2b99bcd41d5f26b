package ipam

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/peerlink/peerlink/internal/cidr"
)

// ErrNoAddress reports that a range has no free address left to give.
var ErrNoAddress = errors.New("no free address in the range")

// AllocateAddress chooses the address of external a local host is remapped
// to. keep, when it is one external may give and taken does not hold it,
// is kept, so that an address once given survives restarts and
// re-reconciles; otherwise the lowest free address is chosen. external's
// first address is never given (it is the cluster's unknown-source address),
// nor, in a range of four addresses or more, its last (the broadcast
// address). It is pure: the caller persists the answer.
func AllocateAddress(external netip.Prefix, taken map[netip.Addr]bool, keep netip.Addr) (netip.Addr, error) {
	if !external.IsValid() || !external.Addr().Is4() || external != external.Masked() {
		return netip.Addr{}, fmt.Errorf("external range %s: must be an IPv4 network", external)
	}
	first, last := external.Addr(), cidr.Last(external)
	givable := func(a netip.Addr) bool {
		if !external.Contains(a) || a == first || (external.Bits() <= 30 && a == last) {
			return false
		}
		return !taken[a]
	}
	if keep.IsValid() && givable(keep) {
		return keep, nil
	}
	// The loop ends at last or after as many steps as taken holds
	// addresses plus two: it costs at most len(taken), never the range.
	for a := first.Next(); a.IsValid() && external.Contains(a); a = a.Next() {
		if givable(a) {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("external range %s: %w", external, ErrNoAddress)
}
