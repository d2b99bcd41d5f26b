package ipam

import (
	"math/bits"
	"net/netip"
)

// u128 is an address of either family as a 128-bit number, IPv4 in its
// IPv4-mapped IPv6 form, so that ranges of both families share one ordered
// space and one arithmetic.
type u128 struct{ hi, lo uint64 }

func u128From(a netip.Addr) u128 {
	b := a.As16()
	var u u128
	for i := range 8 {
		u.hi = u.hi<<8 | uint64(b[i])
		u.lo = u.lo<<8 | uint64(b[i+8])
	}
	return u
}

func (u u128) cmp(v u128) int {
	switch {
	case u.hi < v.hi:
		return -1
	case u.hi > v.hi:
		return 1
	case u.lo < v.lo:
		return -1
	case u.lo > v.lo:
		return 1
	}
	return 0
}

// add returns u+v and whether the sum overflowed 128 bits.
func (u u128) add(v u128) (u128, bool) {
	lo, carry := bits.Add64(u.lo, v.lo, 0)
	hi, carry := bits.Add64(u.hi, v.hi, carry)
	return u128{hi, lo}, carry != 0
}

func (u u128) sub(v u128) u128 {
	lo, borrow := bits.Sub64(u.lo, v.lo, 0)
	hi, _ := bits.Sub64(u.hi, v.hi, borrow)
	return u128{hi, lo}
}

func (u u128) and(v u128) u128 { return u128{u.hi & v.hi, u.lo & v.lo} }
func (u u128) not() u128       { return u128{^u.hi, ^u.lo} }

// pow2 returns 2^n for n < 128.
func pow2(n int) u128 {
	if n >= 64 {
		return u128{hi: 1 << (n - 64)}
	}
	return u128{lo: 1 << n}
}

// span is an inclusive range of addresses.
type span struct{ first, last u128 }

// bits128 is the length of p in the 128-bit space of u128.
func bits128(p netip.Prefix) int {
	return p.Bits() + 128 - p.Addr().BitLen()
}

// spanOf returns the addresses of a masked prefix.
func spanOf(p netip.Prefix) span {
	first := u128From(p.Addr())
	n := 128 - bits128(p)
	if n == 128 {
		return span{first, u128{^uint64(0), ^uint64(0)}}
	}
	last, _ := first.add(pow2(n).sub(u128{lo: 1}))
	return span{first, last}
}
