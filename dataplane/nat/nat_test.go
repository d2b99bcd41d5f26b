package nat

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/internal/testenv/netns"
)

func testRuleset() Ruleset {
	return Ruleset{
		Table: "peerlink-test",
		Sets: []Set{
			{Name: "pods", Prefixes: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
			{Name: "remote", Prefixes: []netip.Prefix{netip.MustParsePrefix("10.72.0.0/16"), netip.MustParsePrefix("10.71.0.0/16")}},
		},
		Maps: []Map{{Name: "to_real", Elements: []MapElement{
			{From: netip.MustParsePrefix("10.71.0.0/16"), To: netip.MustParsePrefix("10.244.0.0/16")},
			{From: netip.MustParsePrefix("10.72.0.0/24"), To: netip.MustParsePrefix("10.70.0.0/24")},
		}}},
		Chains: []Chain{
			{Name: "pre", Type: NAT, Hook: Prerouting, Priority: -100, Rules: []Rule{
				{Comment: "remapped to real", NotIIF: "peerlink-tunnel", DNATMap: "to_real"},
			}},
			{Name: "post", Type: NAT, Hook: Postrouting, Priority: 99, Rules: []Rule{
				{DstIn: "remote", SrcNotIn: "pods", SNATTo: netip.MustParseAddr("10.70.0.1")},
				{DstIn: "remote", SNATKeepSource: true},
			}},
			{Name: "mss", Type: Filter, Hook: Forward, Priority: -150, Rules: []Rule{
				{OIF: "peerlink-tunnel", TCPSYN: true, ClampMSS: 1300},
			}},
		},
	}
}

func TestValidate(t *testing.T) {
	if err := testRuleset().Validate(); err != nil {
		t.Fatalf("valid ruleset: %v", err)
	}
	for name, mutate := range map[string]func(*Ruleset){
		"two statements":      func(rs *Ruleset) { rs.Chains[0].Rules[0].SNATKeepSource = true },
		"no statement":        func(rs *Ruleset) { rs.Chains[0].Rules[0].DNATMap = "" },
		"unknown set":         func(rs *Ruleset) { rs.Chains[1].Rules[0].DstIn = "nope" },
		"unknown map":         func(rs *Ruleset) { rs.Chains[0].Rules[0].DNATMap = "nope" },
		"nat in filter chain": func(rs *Ruleset) { rs.Chains[2].Rules[0] = Rule{SNATKeepSource: true} },
		"length mismatch": func(rs *Ruleset) {
			rs.Maps[0].Elements[0].To = netip.MustParsePrefix("10.244.0.0/24")
		},
		"overlapping set": func(rs *Ruleset) {
			rs.Sets[1].Prefixes = append(rs.Sets[1].Prefixes, netip.MustParsePrefix("10.71.3.0/24"))
		},
	} {
		rs := testRuleset()
		rs.Sets = append([]Set(nil), rs.Sets...)
		rs.Sets[1].Prefixes = append([]netip.Prefix(nil), rs.Sets[1].Prefixes...)
		rs.Maps = []Map{{Name: "to_real", Elements: append([]MapElement(nil), rs.Maps[0].Elements...)}}
		mutate(&rs)
		if err := rs.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}

func TestString(t *testing.T) {
	s := testRuleset().String()
	for _, want := range []string{
		`iifname != "peerlink-tunnel" dnat ip prefix to ip daddr map @to_real`,
		`ip saddr != @pods ip daddr @remote snat to 10.70.0.1`,
		`ip daddr @remote snat to ip saddr`,
		`oifname "peerlink-tunnel" tcp flags syn tcp option maxseg size > 1300 tcp option maxseg size set 1300`,
		`10.71.0.0/16 : 10.244.0.0/16`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("rendered ruleset lacks %q:\n%s", want, s)
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
	m := mapElements([]MapElement{{From: netip.MustParsePrefix("10.71.0.0/16"), To: netip.MustParsePrefix("10.244.0.0/16")}})
	if len(m) != 2 || netip.AddrFrom4([4]byte(m[0].Val[:4])).String() != "10.244.0.0" || netip.AddrFrom4([4]byte(m[0].Val[4:])).String() != "10.244.255.255" {
		t.Errorf("map element value = %v, want the range 10.244.0.0-10.244.255.255", m)
	}
}

func TestApplyIdempotentAndRestoring(t *testing.T) {
	netns.RequirePrivileged(t)
	ns := netns.New(t, "nat")
	a, err := NewApplier(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	rs := testRuleset()

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
	if err := a.Remove(rs.Table); err != nil {
		t.Fatal(err)
	}
	if err := a.Remove(rs.Table); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	tables := ns.MustRun(t, "nft", "list", "tables")
	if strings.Contains(tables, rs.Table) || !strings.Contains(tables, "table ip other") {
		t.Errorf("after Remove, tables are:\n%s", tables)
	}
}
