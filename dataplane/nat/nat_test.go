package nat

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// natRuleset has a rule of every NAT statement and an MSS clamp.
func natRuleset() plan.Ruleset {
	return plan.Ruleset{
		Table: "peerlink-test",
		Sets: []plan.Set{
			{Name: "pods", Prefixes: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
			{Name: "remote", Prefixes: []netip.Prefix{netip.MustParsePrefix("10.72.0.0/16"), netip.MustParsePrefix("10.71.0.0/16")}},
		},
		Maps: []plan.Map{{Name: "to_real", Elements: []plan.MapElement{
			{From: netip.MustParsePrefix("10.71.0.0/16"), To: netip.MustParsePrefix("10.244.0.0/16")},
			{From: netip.MustParsePrefix("10.72.0.0/24"), To: netip.MustParsePrefix("10.70.0.0/24")},
		}}},
		Chains: []plan.Chain{
			{Name: "pre", Type: plan.NAT, Hook: plan.Prerouting, Priority: -100, Rules: []plan.Rule{
				{Comment: "remapped to real", NotIIF: "peerlink-tunnel", DNATMap: "to_real"},
			}},
			{Name: "post", Type: plan.NAT, Hook: plan.Postrouting, Priority: 99, Rules: []plan.Rule{
				{DstIn: "remote", SrcNotIn: "pods", SNATTo: netip.MustParseAddr("10.70.0.1")},
				{DstIn: "remote", SNATKeepSource: true},
			}},
			{Name: "mss", Type: plan.Filter, Hook: plan.Forward, Priority: -150, Rules: []plan.Rule{
				{OIF: "peerlink-tunnel", TCPSYN: true, ClampMSS: 1300},
			}},
		},
	}
}

func TestValidate(t *testing.T) {
	for _, rs := range []plan.Ruleset{natRuleset(), filterRuleset()} {
		if err := rs.Validate(); err != nil {
			t.Errorf("valid ruleset %s: %v", rs.Table, err)
		}
	}
	for name, tc := range map[string]struct {
		ruleset func() plan.Ruleset
		mutate  func(*plan.Ruleset)
	}{
		"two statements":      {natRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[0].SNATKeepSource = true }},
		"no statement":        {natRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[0].DNATMap = "" }},
		"unknown set":         {natRuleset, func(rs *plan.Ruleset) { rs.Chains[1].Rules[0].DstIn = "nope" }},
		"unknown map":         {natRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[0].DNATMap = "nope" }},
		"nat in filter chain": {natRuleset, func(rs *plan.Ruleset) { rs.Chains[2].Rules[0] = plan.Rule{SNATKeepSource: true} }},
		"length mismatch": {natRuleset, func(rs *plan.Ruleset) {
			rs.Maps[0].Elements[0].To = netip.MustParsePrefix("10.244.0.0/24")
		}},
		"overlapping set": {natRuleset, func(rs *plan.Ruleset) {
			rs.Sets[1].Prefixes = append(rs.Sets[1].Prefixes, netip.MustParsePrefix("10.71.3.0/24"))
		}},
		"unknown counter":         {filterRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[1].Counter = "nope" }},
		"counter without verdict": {filterRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[1] = plan.Rule{Counter: "source", ClampMSS: 1300} }},
		"verdict in a nat chain":  {filterRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Type = plan.NAT }},
		"unknown verdict":         {filterRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[0].Verdict = "reject" }},
		"unknown filter set":      {filterRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[3].DstNotIn = "nope" }},
		"IPv6 address":            {filterRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[0].Src = netip.MustParseAddr("fd00::1") }},
		"verdict and nat":         {filterRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[0].SNATKeepSource = true }},
		"notrack in a nat chain":  {natRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[0] = plan.Rule{Notrack: true} }},
		"notrack after conntrack": {filterRuleset, func(rs *plan.Ruleset) { rs.Chains[0].Rules[0] = plan.Rule{Notrack: true} }},
	} {
		rs := tc.ruleset()
		tc.mutate(&rs)
		if err := rs.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}

// TestString checks the nft syntax of each kind of rule: it is shown to
// people and, fingerprinted, stored with each rule.
func TestString(t *testing.T) {
	for _, tc := range []struct {
		rs   plan.Ruleset
		want []string
	}{
		{natRuleset(), []string{
			`iifname != "peerlink-tunnel" dnat ip prefix to ip daddr map @to_real`,
			`ip saddr != @pods ip daddr @remote snat to 10.70.0.1`,
			`ip daddr @remote snat to ip saddr`,
			`oifname "peerlink-tunnel" tcp flags syn tcp option maxseg size > 1300 tcp option maxseg size set 1300`,
			`10.71.0.0/16 : 10.244.0.0/16`,
		}},
		{filterRuleset(), []string{
			`iifname "in" ip saddr 10.9.0.1 ip daddr 10.9.0.2 udp dport 9999 accept`,
			`iifname "in" ip saddr != @allowed counter name "source" drop`,
			`iifname "in" fib daddr type local counter name "self" drop`,
			`iifname "in" ip daddr != @local counter name "destination" drop`,
		}},
	} {
		s := tc.rs.String()
		for _, want := range tc.want {
			if !strings.Contains(s, want) {
				t.Errorf("rendered ruleset lacks %q:\n%s", want, s)
			}
		}
	}
}

func TestSetElements(t *testing.T) {
	got := setElements([]netip.Prefix{netip.MustParsePrefix("10.72.0.0/16"), netip.MustParsePrefix("10.71.0.0/16")})
	want := []struct {
		key string
		end bool
	}{{"10.71.0.0", false}, {"10.72.0.0", true}, {"10.72.0.0", false}, {"10.73.0.0", true}}
	if len(got) != len(want) {
		t.Fatalf("got %d elements, want %d", len(got), len(want))
	}
	for i, w := range want {
		k, _ := netip.AddrFromSlice(got[i].Key)
		if k.String() != w.key || got[i].IntervalEnd != w.end {
			t.Errorf("element %d = %s end=%v, want %s end=%v", i, k, got[i].IntervalEnd, w.key, w.end)
		}
	}
	m := mapElements([]plan.MapElement{{From: netip.MustParsePrefix("10.71.0.0/16"), To: netip.MustParsePrefix("10.244.0.0/16")}})
	if len(m) != 2 || netip.AddrFrom4([4]byte(m[0].Val[:4])).String() != "10.244.0.0" || netip.AddrFrom4([4]byte(m[0].Val[4:])).String() != "10.244.255.255" {
		t.Errorf("map element value = %v, want the range 10.244.0.0-10.244.255.255", m)
	}
}

func TestApplyIdempotentAndRestoring(t *testing.T) {
	ns, a := applierInNewNetns(t, "nat")
	rs := natRuleset()

	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("first Apply = %v, %v; want a write", changed, err)
	}
	listing := ns.MustRun(t, "nft", "list", "table", "ip", rs.Table)
	for _, want := range []string{
		`dnat ip prefix to ip daddr map @to_real`,
		`snat to 10.70.0.1`,
		`tcp option maxseg size set 1300`,
		`comment "remapped to real [`,
	} {
		if !strings.Contains(listing, want) {
			t.Errorf("nft listing lacks %q:\n%s", want, listing)
		}
	}
	if changed, err := a.Apply(rs); err != nil || changed {
		t.Fatalf("second Apply = %v, %v; want no write", changed, err)
	}
	if again := ns.MustRun(t, "nft", "list", "table", "ip", rs.Table); again != listing {
		t.Errorf("second Apply changed the table:\n%s\nthen:\n%s", listing, again)
	}

	ns.MustRun(t, "nft", "flush", "table", "ip", rs.Table)
	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("Apply after a flush = %v, %v; want a write", changed, err)
	}
	if again := ns.MustRun(t, "nft", "list", "table", "ip", rs.Table); again != listing {
		t.Errorf("Apply after a flush did not restore the table:\n%s\nthen:\n%s", listing, again)
	}

	// A chain added to the table is found, though the applier reads only
	// the chains it wants by name; another table's chains are not its
	// concern.
	ns.MustRun(t, "nft", "add", "chain", "ip", rs.Table, "stray")
	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("Apply after a chain was added = %v, %v; want a write", changed, err)
	}
	if again := ns.MustRun(t, "nft", "list", "table", "ip", rs.Table); again != listing {
		t.Errorf("Apply after a chain was added did not restore the table:\n%s\nthen:\n%s", listing, again)
	}
	ns.MustRun(t, "nft", "add", "table", "ip", "beside")
	ns.MustRun(t, "nft", "add", "chain", "ip", "beside", "post", "{ type nat hook postrouting priority 100; }")
	if changed, err := a.Apply(rs); err != nil || changed {
		t.Fatalf("Apply beside another table's chains = %v, %v; want no write", changed, err)
	}
	ns.MustRun(t, "nft", "delete", "table", "ip", "beside")

	ns.MustRun(t, "nft", "delete", "element", "ip", rs.Table, "remote", "{ 10.72.0.0/16 }")
	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("Apply after an element was deleted = %v, %v; want a write", changed, err)
	}

	rs.Maps[0].Elements = rs.Maps[0].Elements[:1]
	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("Apply of a smaller map = %v, %v; want a write", changed, err)
	}
	if l := ns.MustRun(t, "nft", "list", "map", "ip", rs.Table, "to_real"); strings.Contains(l, "10.72.0.0") {
		t.Errorf("removed map element still present:\n%s", l)
	}

	ns.MustRun(t, "nft", "add", "table", "ip", "other")
	if err := a.Remove(rs.Table, rs.Family); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(rs.Table, rs.Family); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	tables := ns.MustRun(t, "nft", "list", "tables")
	if strings.Contains(tables, rs.Table) || !strings.Contains(tables, "table ip other") {
		t.Errorf("after Remove, tables are:\n%s", tables)
	}
}
