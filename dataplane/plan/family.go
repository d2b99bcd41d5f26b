package plan

import (
	"fmt"
	"net/netip"
)

// Family is an address family, named as nftables names the families of
// its tables. IPv4 and IPv6 are parallel planes: each has its own ranges,
// sets, maps and table.
type Family string

// Families.
const (
	IPv4 Family = "ip"
	IPv6 Family = "ip6"
)

// FamilyOf is the family of a: an IPv4-mapped IPv6 address is IPv4, as the
// kernel routes it; an invalid address has none ("").
func FamilyOf(a netip.Addr) Family {
	switch {
	case !a.IsValid():
		return ""
	case a.Unmap().Is4():
		return IPv4
	default:
		return IPv6
	}
}

// name is how errors call the family.
func (f Family) name() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// check reports an address a (written v, the address or a prefix of it)
// that a table of family f cannot hold: one of the other family, or an
// IPv4-mapped one, which a table of family ip would compare as four bytes
// and one of family ip6 never sees.
func (f Family) check(v string, a netip.Addr) error {
	if FamilyOf(a) != f {
		return fmt.Errorf("%s is not %s", v, f.name())
	}
	if a.Is4In6() {
		return fmt.Errorf("%s is IPv4-mapped: write it in IPv4 form", v)
	}
	return nil
}

// checkAddr is check for an address.
func (f Family) checkAddr(a netip.Addr) error { return f.check(a.String(), a) }

// checkPrefix is check for a prefix.
func (f Family) checkPrefix(p netip.Prefix) error { return f.check(p.String(), p.Addr()) }

// addrType is nft's name of the family's address type.
func (f Family) addrType() string {
	if f == IPv6 {
		return "ipv6_addr"
	}
	return "ipv4_addr"
}
