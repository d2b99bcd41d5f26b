package plan

import (
	"net/netip"
	"reflect"
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
