package plan

import (
	"net/netip"
	"strings"
	"testing"
)

func TestFamilyOf(t *testing.T) {
	for addr, want := range map[string]Family{
		"10.244.0.1":        IPv4,
		"::ffff:10.244.0.1": IPv4,
		"fd44:1::1":         IPv6,
		"::1":               IPv6,
	} {
		if got := FamilyOf(netip.MustParseAddr(addr)); got != want {
			t.Errorf("FamilyOf(%s) = %q, want %q", addr, got, want)
		}
	}
	if got := FamilyOf(netip.Addr{}); got != "" {
		t.Errorf("FamilyOf(invalid) = %q, want none", got)
	}
}

// ip6Ruleset uses every address-bearing field in family ip6.
func ip6Ruleset() Ruleset {
	p := netip.MustParsePrefix
	return Ruleset{
		Table:  "t6",
		Family: IPv6,
		Sets:   []Set{{Name: "pods", Prefixes: []netip.Prefix{p("fd44:1::/48")}}},
		Maps:   []Map{{Name: "to_real", Elements: []MapElement{{From: p("fd00:71::/48"), To: p("fd44:2::/48")}}}},
		Chains: []Chain{
			{Name: "pre", Type: NAT, Hook: Prerouting, Priority: -100, Rules: []Rule{
				{Comment: "remapped to real", NotIIF: "tun", DNATMap: "to_real"},
			}},
			{Name: "post", Type: NAT, Hook: Postrouting, Priority: 100, Rules: []Rule{
				{SrcNotIn: "pods", Dst: netip.MustParseAddr("fd44:2::1"), SNATTo: netip.MustParseAddr("fd00:70::1")},
				{Src: netip.MustParseAddr("fd44:1::5"), SNATKeepSource: true},
			}},
		},
	}
}

// TestValidateFamily checks that an address or prefix of the other family
// in any field is refused, with an error naming the table, its family,
// where the value is and the value itself.
func TestValidateFamily(t *testing.T) {
	if err := ip6Ruleset().Validate(); err != nil {
		t.Fatalf("valid ip6 ruleset: %v", err)
	}
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	for name, tc := range map[string]struct {
		mutate func(*Ruleset)
		want   string
	}{
		"set prefix": {func(rs *Ruleset) { rs.Sets[0].Prefixes = append(rs.Sets[0].Prefixes, p("10.244.0.0/16")) },
			"table ip6 t6: set pods: 10.244.0.0/16 is not IPv6"},
		"map key": {func(rs *Ruleset) { rs.Maps[0].Elements[0].From = p("10.71.0.0/16") },
			"table ip6 t6: map to_real: element 10.71.0.0/16 : fd44:2::/48: 10.71.0.0/16 is not IPv6"},
		"map value": {func(rs *Ruleset) { rs.Maps[0].Elements[0].To = p("10.244.0.0/16") },
			"map to_real: element fd00:71::/48 : 10.244.0.0/16: 10.244.0.0/16 is not IPv6"},
		"rule source": {func(rs *Ruleset) { rs.Chains[1].Rules[1].Src = a("10.244.0.5") },
			"table ip6 t6: chain post: rule 1: source address: 10.244.0.5 is not IPv6"},
		"rule destination": {func(rs *Ruleset) { rs.Chains[1].Rules[0].Dst = a("10.244.0.1") },
			"chain post: rule 0: destination address: 10.244.0.1 is not IPv6"},
		"snat to": {func(rs *Ruleset) { rs.Chains[1].Rules[0].SNATTo = a("10.70.0.1") },
			"chain post: rule 0: snat to address: 10.70.0.1 is not IPv6"},
		"mapped in ip6": {func(rs *Ruleset) { rs.Chains[1].Rules[0].SNATTo = a("::ffff:10.70.0.1") },
			"snat to address: ::ffff:10.70.0.1 is not IPv6"},
		"IPv6 in ip": {func(rs *Ruleset) {
			*rs = Ruleset{Table: "t4", Sets: []Set{{Name: "s", Prefixes: []netip.Prefix{p("fd44::/48")}}}}
		},
			"table ip t4: set s: fd44::/48 is not IPv4"},
		"mapped in ip": {func(rs *Ruleset) {
			*rs = Ruleset{Table: "t4", Sets: []Set{{Name: "s", Prefixes: []netip.Prefix{p("::ffff:10.0.0.0/104")}}}}
		}, "table ip t4: set s: ::ffff:10.0.0.0/104 is IPv4-mapped: write it in IPv4 form"},
		"unknown family": {func(rs *Ruleset) { rs.Family = "inet" }, `table t6: family "inet": want "ip" or "ip6"`},
	} {
		rs := ip6Ruleset()
		tc.mutate(&rs)
		err := rs.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// TestStringFamily checks that an ip6 ruleset renders in nft's ip6 syntax
// (what nft itself prints for it), and that a plan shows the ip6 table
// only when it has one.
func TestStringFamily(t *testing.T) {
	rs := ip6Ruleset()
	s := rs.String()
	for _, want := range []string{
		"table ip6 t6 {\n",
		"\tset pods {\n\t\ttype ipv6_addr\n\t\tflags interval\n\t\telements = { fd44:1::/48 }\n",
		"\tmap to_real {\n\t\ttype ipv6_addr : interval ipv6_addr\n\t\tflags interval\n\t\telements = { fd00:71::/48 : fd44:2::/48 }\n",
		`iifname != "tun" dnat ip6 prefix to ip6 daddr map @to_real comment "remapped to real"`,
		"ip6 saddr != @pods ip6 daddr fd44:2::1 snat to fd00:70::1\n",
		"ip6 saddr fd44:1::5 snat to ip6 saddr\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("rendered ip6 ruleset lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "ip saddr") || strings.Contains(s, "ipv4_addr") {
		t.Errorf("rendered ip6 ruleset speaks of IPv4:\n%s", s)
	}
	if got := (Rule{SNATMap: "m"}).Syntax(IPv6); got != "snat ip6 prefix to ip6 saddr map @m" {
		t.Errorf("ip6 prefix SNAT renders as %q", got)
	}
	if got, want := (Rule{SNATMap: "m"}).String(), "snat ip prefix to ip saddr map @m"; got != want {
		t.Errorf("Rule.String = %q, want the ip syntax %q", got, want)
	}

	n := NetNS{Overlay: Overlay{Name: "ovl", Kind: VXLAN, Underlay: netip.MustParseAddr("192.0.2.1")}, NAT: Ruleset{Table: "t"}}
	if s := n.String(); strings.Contains(s, "ip6") {
		t.Errorf("a plan without an ip6 table shows one:\n%s", s)
	}
	n.NAT6 = Ruleset{Table: "t", Family: IPv6}
	if s := n.String(); strings.Contains(s, "ip6") {
		t.Errorf("a plan with an empty ip6 table shows it:\n%s", s)
	}
	n.NAT6 = rs
	if s := n.String(); !strings.Contains(s, "\n# nftables ip6\ntable ip6 t6 {\n") {
		t.Errorf("a plan with an ip6 table does not show it:\n%s", s)
	}
}
