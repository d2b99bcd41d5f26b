package plan

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestRoutingStrings checks each part as ip(8) would show it.
func TestRoutingStrings(t *testing.T) {
	gw := netip.MustParseAddr("10.244.0.10")
	for _, tc := range []struct {
		part interface{ String() string }
		want string
	}{
		{Route{Table: 1801, Dst: netip.MustParsePrefix("10.71.0.0/16"), Link: "ovl", Via: gw, Encap: gw, VNI: 6091},
			"10.71.0.0/16 encap ip id 6091 dst 10.244.0.10 via 10.244.0.10 dev ovl onlink table 1801"},
		{Route{Table: 1801, Dst: netip.MustParsePrefix("0.0.0.0/0"), Unreachable: true}, "unreachable 0.0.0.0/0 table 1801"},
		{Route{Table: 1801, Dst: netip.MustParsePrefix("10.71.0.0/16"), Blackhole: true}, "blackhole 10.71.0.0/16 table 1801"},
		{Route{Table: 1801, Dst: netip.MustParsePrefix("fd44:2::/48"), Link: "ovl", Via: netip.MustParseAddr("fd30:0:1::2"), Encap: netip.MustParseAddr("fd30:0:1::2"), VNI: 6091},
			"fd44:2::/48 encap ip6 id 6091 dst fd30:0:1::2 via fd30:0:1::2 dev ovl onlink table 1801"},
		{PolicyRule{Priority: 1801, IIF: "ovl", Table: 1801}, "1801: from all iif ovl lookup 1801"},
		{PolicyRule{Priority: 1803, Src: netip.MustParsePrefix("10.244.0.0/16"), Table: 1803}, "1803: from 10.244.0.0/16 lookup 1803"},
		{Neighbor{Link: "ovl", IP: gw, MAC: OverlayMAC(gw)}, "10.244.0.10 dev ovl lladdr 02:50:0a:f4:00:0a permanent"},
		{Address{Link: "tun", Prefix: netip.MustParsePrefix("169.254.18.1/30")}, "169.254.18.1/30 dev tun"},
		{Link{Name: "tun", MTU: 1340, Router: true, AcceptLocal: true}, "link tun mtu 1340 forwarding on rp_filter off send_redirects off accept_local on"},
	} {
		if got := tc.part.String(); got != tc.want {
			t.Errorf("%T.String() = %q, want %q", tc.part, got, tc.want)
		}
	}
}

// TestRoutingSorted checks that two states listing the same parts in other
// orders come out equal, and that the original is left alone.
func TestRoutingSorted(t *testing.T) {
	a, b := netip.MustParsePrefix("10.71.0.0/16"), netip.MustParsePrefix("10.72.0.0/16")
	s := Routing{
		Routes: []Route{{Table: 1802, Dst: a}, {Table: 1801, Dst: b}, {Table: 1801, Dst: a}},
		Rules:  []PolicyRule{{Priority: 1802, Table: 1802}, {Priority: 1801, IIF: "ovl", Table: 1801}},
		Tables: []int{1802, 1801},
	}
	want := Routing{
		Routes: []Route{{Table: 1801, Dst: a}, {Table: 1801, Dst: b}, {Table: 1802, Dst: a}},
		Rules:  []PolicyRule{{Priority: 1801, IIF: "ovl", Table: 1801}, {Priority: 1802, Table: 1802}},
		Tables: []int{1801, 1802},
	}
	if got := s.Sorted(); !reflect.DeepEqual(got, want) {
		t.Errorf("Sorted() = %+v, want %+v", got, want)
	}
	if s.Routes[0].Table != 1802 || s.Tables[0] != 1802 {
		t.Errorf("Sorted changed its receiver: %+v", s)
	}
}

// TestRoutingValidate checks a dual-stack routing passes and that each
// family mistake is refused with the field named.
func TestRoutingValidate(t *testing.T) {
	gw4, gw6 := netip.MustParseAddr("10.244.0.10"), netip.MustParseAddr("fd44:1::10")
	good := Routing{
		Addresses: []Address{{Link: "tun", Prefix: netip.MustParsePrefix("fd44:1::1/64")}},
		Neighbors: []Neighbor{{Link: "ovl", IP: gw4, MAC: OverlayMAC(gw4)}, {Link: "ovl", IP: gw6, MAC: []byte{2, 0x51, 1, 2, 3, 4}}},
		Routes: []Route{
			{Table: 1802, Dst: netip.MustParsePrefix("fd44:2::/48"), Link: "ovl", Via: gw4, Encap: gw4, VNI: VNI},
			{Table: 1802, Dst: netip.MustParsePrefix("fd44:3::/48"), Link: "ovl", Via: gw6, Encap: gw6, VNI: VNI},
			{Table: 1802, Dst: netip.MustParsePrefix("::/0"), Unreachable: true},
			// An IPv6-only cluster's IPv4 ranges (its external range, a
			// gateway's way back to its node) go through IPv6 next hops.
			{Table: 1802, Dst: netip.MustParsePrefix("10.71.0.0/16"), Link: "ovl", Via: gw6, Encap: gw6, VNI: VNI},
		},
		Rules: []PolicyRule{{Priority: 1802, Src: netip.MustParsePrefix("fd44:1::/48"), Table: 1802}},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(*Routing)
		want string
	}{
		"IPv4 route via IPv6 without neighbor": {func(s *Routing) { s.Neighbors = s.Neighbors[:1] }, "Via fd44:1::10 has no neighbor entry on link ovl"},
		"IPv6 route without neighbor":          {func(s *Routing) { s.Neighbors = s.Neighbors[1:] }, "Via 10.244.0.10 has no neighbor entry on link ovl"},
		"neighbor on another link":             {func(s *Routing) { s.Neighbors[0].Link = "tun" }, "Via 10.244.0.10 has no neighbor entry on link ovl"},
		"mapped neighbor": {func(s *Routing) {
			s.Neighbors[0].IP = netip.AddrFrom16(gw4.As16())
		}, "IP ::ffff:10.244.0.10 is not an IPv4 or IPv6 address"},
		"short MAC":          {func(s *Routing) { s.Neighbors[1].MAC = s.Neighbors[1].MAC[:4] }, "MAC 02:51:"},
		"unreachable via":    {func(s *Routing) { s.Routes[2].Link = "ovl" }, "an unreachable or blackhole route has no Link"},
		"blackhole via":      {func(s *Routing) { s.Routes[2].Unreachable, s.Routes[2].Blackhole, s.Routes[2].Via = false, true, gw4 }, "an unreachable or blackhole route has no Link"},
		"both dead ends":     {func(s *Routing) { s.Routes[2].Blackhole = true }, "Unreachable and Blackhole exclude each other"},
		"no link":            {func(s *Routing) { s.Routes[1].Link = "" }, "Link is empty"},
		"VNI above 24 bits":  {func(s *Routing) { s.Routes[0].VNI = 1 << 24 }, "VNI 16777216"},
		"invalid address":    {func(s *Routing) { s.Addresses[0].Prefix = netip.Prefix{} }, "address on link tun: Prefix"},
		"mapped rule source": {func(s *Routing) { s.Rules[0].Src = netip.MustParsePrefix("::ffff:10.0.0.0/104") }, "Src ::ffff:10.0.0.0/104"},
	} {
		s := good
		s.Addresses, s.Neighbors, s.Routes, s.Rules = slices.Clone(s.Addresses), slices.Clone(s.Neighbors), slices.Clone(s.Routes), slices.Clone(s.Rules)
		tc.edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error with %q", name, err, tc.want)
		}
	}
}
