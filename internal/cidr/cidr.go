package cidr

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// ErrHostBits reports a prefix whose address has bits set past the prefix
// length, such as 10.244.1.0/16: it names an address, not a network.
var ErrHostBits = errors.New("host bits set")

// ParseNetwork parses s as a network in CIDR notation. Unlike
// netip.ParsePrefix it rejects host bits (10.244.1.0/16), because a remapped
// range must be the exact network the peer routes, and it returns IPv4-mapped
// IPv6 prefixes as plain IPv4 ones so that both spellings of a range collide.
func ParseNetwork(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("%q: IPv4-mapped prefix shorter than /96", s)
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%q: %w (the network is %s)", s, ErrHostBits, p.Masked())
	}
	return p, nil
}

// MustPrefixes parses each of ss with netip.MustParsePrefix, for ranges
// fixed in code: it panics on one that is not a prefix.
func MustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// FirstOverlap returns the indexes i < j of two prefixes of ps that overlap;
// ok is false when no two do. The pair reported is the same for the same
// input, so errors built from it are stable. Invalid prefixes overlap nothing.
func FirstOverlap(ps []netip.Prefix) (i, j int, ok bool) {
	order := make([]int, 0, len(ps))
	for k, p := range ps {
		if p.IsValid() {
			order = append(order, k)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		pa, pb := ps[a].Masked(), ps[b].Masked()
		if c := pa.Addr().Compare(pb.Addr()); c != 0 {
			return c
		}
		return pa.Bits() - pb.Bits()
	})
	// Prefixes are nested or disjoint. Sorted by start (shorter first), a
	// prefix that overlaps an earlier one contains its start; while no pair
	// overlapped so far the earlier prefixes are disjoint, and the only one
	// that can contain the start is the one just before. So comparing
	// neighbours finds an overlap in O(n log n).
	for n := 1; n < len(order); n++ {
		a, b := order[n-1], order[n]
		if ps[a].Overlaps(ps[b]) {
			return min(a, b), max(a, b), true
		}
	}
	return 0, 0, false
}

// Translate maps addr, an address inside from, to the address with the same
// host bits inside to: with from 10.244.0.0/16 and to 10.71.0.0/16,
// 10.244.1.7 becomes 10.71.1.7. Both prefixes must have the same length and
// family, and addr must lie in from.
func Translate(addr netip.Addr, from, to netip.Prefix) (netip.Addr, error) {
	if from.Bits() != to.Bits() || from.Addr().BitLen() != to.Addr().BitLen() {
		return netip.Addr{}, fmt.Errorf("translate %s: prefixes %s and %s differ in length or family", addr, from, to)
	}
	if !from.Contains(addr) {
		return netip.Addr{}, fmt.Errorf("translate %s: not in %s", addr, from)
	}
	a, t := addr.As16(), to.Masked().Addr().As16()
	// The first bits of a 16-byte form that belong to the prefix: IPv4
	// addresses sit in the last 4 bytes.
	keep := to.Bits() + 128 - to.Addr().BitLen()
	for i := range a {
		switch {
		case keep >= 8:
			a[i] = t[i]
			keep -= 8
		case keep > 0:
			mask := byte(0xff << (8 - keep))
			a[i] = t[i]&mask | a[i]&^mask
			keep = 0
		}
	}
	out := netip.AddrFrom16(a)
	if to.Addr().Is4() {
		out = out.Unmap()
	}
	return out, nil
}

// Last is the highest address of the IPv4 network p.
func Last(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
