package route

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

func TestApply(t *testing.T) {
	ns, _ := netns.Joined(t, netns.End{Prefix: "route", Link: "up0"}, netns.End{Prefix: "peer", Link: "down0"})
	ns.MustRun(t, "ip", "link", "add", "ovl", "type", "vxlan", "external", "dstport", "4790")

	a := newTestApplier(t, ns)
	gw := netip.MustParseAddr("10.244.0.10")
	want := plan.Routing{
		Links:     []plan.Link{{Name: "up0", MTU: 1400, Router: true, AcceptLocal: true}, {Name: "ovl", Router: true}},
		Addresses: []plan.Address{{Link: "up0", Prefix: netip.MustParsePrefix("169.254.18.1/30")}},
		Neighbors: []plan.Neighbor{{Link: "ovl", IP: gw, MAC: []byte{2, 0x50, 10, 244, 0, 10}}},
		Routes: []plan.Route{
			{Table: 1801, Dst: netip.MustParsePrefix("10.244.0.0/16"), Link: "up0"},
			{Table: 1801, Dst: netip.MustParsePrefix("0.0.0.0/0"), Unreachable: true},
			{Table: 1802, Dst: netip.MustParsePrefix("10.71.0.0/16"), Link: "ovl", Via: gw, Encap: gw, VNI: 6091},
			{Table: 1802, Dst: netip.MustParsePrefix("10.72.0.0/16"), Unreachable: true},
		},
		Rules: []plan.PolicyRule{
			{Priority: 1801, IIF: "ovl", Table: 1801},
			{Priority: 1802, Src: netip.MustParsePrefix("10.244.0.0/16"), Table: 1802},
			{Priority: 1802, Src: netip.MustParsePrefix("10.245.0.0/16"), Table: 1802},
		},
		Tables:         []int{1801, 1802},
		RulePriorities: []int{1801, 1802},
		LocalExceptIIF: "ovl",
	}
	changes, err := a.Apply(want)
	if err != nil {
		t.Fatalf("Apply: %v (after %v)", err, changes)
	}
	if len(changes) == 0 {
		t.Fatal("first Apply reported no change")
	}
	routes := ns.MustRun(t, "ip", "route", "show", "table", "1802")
	if !strings.Contains(routes, "10.71.0.0/16  encap ip id 6091 src 0.0.0.0 dst 10.244.0.10") || !strings.Contains(routes, "via 10.244.0.10 dev ovl") {
		t.Errorf("table 1802:\n%s", routes)
	}
	if conf := ns.MustRun(t, "sysctl", "-n", "net.ipv4.conf.up0.forwarding", "net.ipv4.conf.up0.rp_filter", "net.ipv4.conf.up0.send_redirects", "net.ipv4.conf.up0.accept_local"); conf != "1\n0\n0\n1\n" {
		t.Errorf("up0 forwarding, rp_filter, send_redirects, accept_local = %q", conf)
	}
	if rules := ns.MustRun(t, "ip", "rule"); !strings.Contains(rules, "0:\tnot from all iif ovl lookup local") || strings.Contains(rules, "0:\tfrom all lookup local") {
		t.Errorf("the local table rule should skip packets from ovl:\n%s", rules)
	}

	if changes, err := a.Apply(want); err != nil || len(changes) != 0 {
		t.Fatalf("second Apply = %v, %v; want nothing written", changes, err)
	}

	// A range whose gateway is being replaced: its unreachable route
	// becomes a blackhole, and back.
	for _, blackhole := range []bool{true, false} {
		want.Routes[3].Unreachable, want.Routes[3].Blackhole = !blackhole, blackhole
		changes, err := a.Apply(want)
		if err != nil {
			t.Fatal(err)
		}
		if c := "route " + want.Routes[3].String() + ": written"; !slices.Equal(changes, []string{c}) {
			t.Errorf("Apply with blackhole=%v: changes %q, want %q", blackhole, changes, c)
		}
		kind := map[bool]string{true: "blackhole 10.72.0.0/16", false: "unreachable 10.72.0.0/16"}[blackhole]
		if routes := ns.MustRun(t, "ip", "route", "show", "table", "1802"); !strings.Contains(routes, kind) {
			t.Errorf("table 1802 with blackhole=%v lacks %q:\n%s", blackhole, kind, routes)
		}
	}

	ns.MustRun(t, "ip", "route", "del", "10.244.0.0/16", "table", "1801")
	ns.MustRun(t, "ip", "rule", "del", "priority", "1801")
	ns.MustRun(t, "ip", "rule", "add", "priority", "1802", "from", "all", "lookup", "main")
	ns.MustRun(t, "ip", "route", "add", "192.0.2.0/24", "dev", "up0", "table", "1801")
	ns.MustRun(t, "ip", "addr", "add", "192.0.2.1/24", "dev", "up0")
	changes, err = a.Apply(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"route 10.244.0.0/16 dev up0 table 1801: written", "route 192.0.2.0/24 table 1801: deleted", "rule 1801: from all iif ovl lookup 1801: added", "address 192.0.2.1/24 dev up0: deleted"} {
		if !slices.Contains(changes, c) {
			t.Errorf("Apply after hand edits: changes %q lack %q", changes, c)
		}
	}
	if changes, err := a.Apply(want); err != nil || len(changes) != 0 {
		t.Fatalf("Apply after repair = %v, %v; want nothing written", changes, err)
	}

	ns.MustRun(t, "ip", "rule", "add", "priority", "100", "from", "all", "lookup", "main")
	if err := a.Remove(want); err != nil {
		t.Fatal(err)
	}
	rules := ns.MustRun(t, "ip", "rule")
	if strings.Contains(rules, "1801:") || strings.Contains(rules, "1802:") || !strings.Contains(rules, "100:") ||
		!strings.Contains(rules, "0:\tfrom all lookup local") || strings.Contains(rules, "not from") {
		t.Errorf("rules after Remove:\n%s", rules)
	}
	if out := ns.MustRun(t, "ip", "route", "show", "table", "1801"); out != "" {
		t.Errorf("table 1801 after Remove:\n%s", out)
	}

	missing := want
	missing.Links = append(missing.Links, plan.Link{Name: "nope"})
	if _, err := a.Apply(missing); err == nil || !strings.Contains(err.Error(), "link nope") {
		t.Errorf("Apply with a missing link = %v", err)
	}
}

// newTestApplier returns an applier for ns, closed when the test ends.
func newTestApplier(t *testing.T, ns *netns.NS) *Applier {
	t.Helper()
	a, err := NewApplier(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}
