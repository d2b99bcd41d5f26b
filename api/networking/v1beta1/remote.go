package v1beta1

import (
	"fmt"
	"net/netip"

	"github.com/peerlink/peerlink/internal/cidr"
)

// RemoteRange is one range of a peer: as its Configuration declares it
// (Real, from spec.remote.cidr) and as this cluster reaches it (Remapped,
// the entry at the same place of status.remote.cidr: equal to Real when
// the range is kept, invalid while the controller has not allocated it).
// It is worked out from a Configuration, never stored.
// +kubebuilder:object:generate=false
type RemoteRange struct {
	// Field is the list the range is in: "pod" or "external".
	Field string
	// Index is its place in that list.
	Index          int
	Real, Remapped netip.Prefix
}

// RemoteRanges pairs the entries of spec.remote.cidr with those at the same
// place of status.remote.cidr, the pod ranges first, then the external
// ones. An entry of either side that is not a network, or a remapped range
// of another size than its real one, is an error naming the field and the
// Configuration: status.remote was written for another spec.
func (c *Configuration) RemoteRanges() ([]RemoteRange, error) {
	var status ClusterConfigCIDR
	if c.Status.Remote != nil {
		status = c.Status.Remote.CIDR
	}
	var out []RemoteRange
	for _, l := range []struct {
		field          string
		spec, remapped []CIDR
	}{{"pod", c.Spec.Remote.CIDR.Pod, status.Pod}, {"external", c.Spec.Remote.CIDR.External, status.External}} {
		for i, s := range l.spec {
			r := RemoteRange{Field: l.field, Index: i}
			var err error
			if r.Real, err = cidr.ParseNetwork(string(s)); err != nil {
				return nil, fmt.Errorf("spec.remote.cidr.%s[%d] of Configuration %s/%s: %w", l.field, i, c.Namespace, c.Name, err)
			}
			if i < len(l.remapped) && l.remapped[i] != "" {
				if r.Remapped, err = cidr.ParseNetwork(string(l.remapped[i])); err != nil {
					return nil, fmt.Errorf("status.remote.cidr.%s[%d] of Configuration %s/%s: %w", l.field, i, c.Namespace, c.Name, err)
				}
				if r.Remapped.Bits() != r.Real.Bits() || r.Remapped.Addr().Is4() != r.Real.Addr().Is4() {
					return nil, fmt.Errorf("status.remote.cidr.%s[%d] of Configuration %s/%s: %s cannot stand for %s", l.field, i, c.Namespace, c.Name, r.Remapped, r.Real)
				}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// RecordedRanges are the ranges status.remote.cidr records, every entry
// that is a network, each with Real set to the entry at the same place of
// spec.remote.cidr when that one is a network of the same size (the range
// it was allocated for), invalid otherwise: unlike RemoteRanges it never
// fails, so that what the controller allocated is remembered even when the
// spec has changed or broken since. Pod ranges first, then external ones.
func (c *Configuration) RecordedRanges() []RemoteRange {
	if c.Status.Remote == nil {
		return nil
	}
	var out []RemoteRange
	for _, l := range []struct {
		field          string
		spec, remapped []CIDR
	}{{"pod", c.Spec.Remote.CIDR.Pod, c.Status.Remote.CIDR.Pod}, {"external", c.Spec.Remote.CIDR.External, c.Status.Remote.CIDR.External}} {
		for i, s := range l.remapped {
			got, err := cidr.ParseNetwork(string(s))
			if err != nil {
				continue
			}
			r := RemoteRange{Field: l.field, Index: i, Remapped: got}
			if i < len(l.spec) {
				if want, err := cidr.ParseNetwork(string(l.spec[i])); err == nil && want.Bits() == got.Bits() {
					r.Real = want
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// RemappedRanges are the RemoteRanges the controller has allocated, the
// ones through which the peer is reached; nil while none is.
func (c *Configuration) RemappedRanges() ([]RemoteRange, error) {
	ranges, err := c.RemoteRanges()
	if err != nil {
		return nil, err
	}
	var out []RemoteRange
	for _, r := range ranges {
		if r.Remapped.IsValid() {
			out = append(out, r)
		}
	}
	return out, nil
}

// RemappedAddr is the address under which this cluster reaches addr, an
// address of one of the peer's declared ranges: the same host bits in the
// range the controller allocated for it. It is an error while that range
// is not allocated, or when no declared range holds addr.
func (c *Configuration) RemappedAddr(addr netip.Addr) (netip.Addr, error) {
	ranges, err := c.RemoteRanges()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, r := range ranges {
		if !r.Real.Contains(addr) {
			continue
		}
		if !r.Remapped.IsValid() {
			return netip.Addr{}, fmt.Errorf("Configuration %s/%s: status.remote.cidr.%s[%d] not allocated yet for %s", c.Namespace, c.Name, r.Field, r.Index, r.Real)
		}
		return cidr.Translate(addr, r.Real, r.Remapped)
	}
	return netip.Addr{}, fmt.Errorf("Configuration %s/%s: %s is in none of the ranges of spec.remote.cidr", c.Namespace, c.Name, addr)
}
