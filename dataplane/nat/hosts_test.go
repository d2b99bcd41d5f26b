package nat

import (
	"net"
	"net/netip"
	"testing"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// TestRemappedHostInKernel writes what a gateway writes for remapped
// hosts, single addresses side by side in an interval set (10.70.0.0,
// .1 and .2, whose intervals touch) and a map of single addresses, into a
// real namespace: a datagram to a remapped address arrives at the real
// one, a packet to an address of the range that no host holds is dropped
// and counted, and a second Apply, reading the touching intervals back,
// finds nothing to write.
func TestRemappedHostInKernel(t *testing.T) {
	src, dst := netns.Joined(t,
		netns.End{Prefix: "hsrc", Link: "out", Addr: "10.9.0.1/24"},
		netns.End{Prefix: "hdst", Link: "in", Addr: "10.9.0.2/24"})
	src.MustRun(t, "ip", "route", "add", "10.70.0.0/16", "via", "10.9.0.2")
	p := netip.MustParsePrefix
	rs := plan.Ruleset{
		Table: "peerlink-hosts-test",
		Sets: []plan.Set{{Name: "reachable", Prefixes: []netip.Prefix{
			p("10.70.0.0/32"), p("10.70.0.1/32"), p("10.70.0.2/32"), p("10.244.0.0/16"),
		}}},
		Maps: []plan.Map{{Name: "ip_to_local", Elements: []plan.MapElement{
			{From: p("10.70.0.1/32"), To: p("10.9.0.2/32")},
			{From: p("10.70.0.2/32"), To: p("192.168.7.7/32")},
		}}},
		Counters: []string{"destination"},
		Chains: []plan.Chain{
			{Name: "ingress", Type: plan.Filter, Hook: plan.Prerouting, Priority: -150, Rules: []plan.Rule{
				{IIF: "in", DstNotIn: "reachable", Counter: "destination", Verdict: plan.Drop},
			}},
			{Name: "prerouting", Type: plan.NAT, Hook: plan.Prerouting, Priority: -100, Rules: []plan.Rule{
				{IIF: "in", DNATMap: "ip_to_local"},
			}},
		},
	}
	a := applyOnce(t, dst, rs)
	if from, err := sendUDP(t, src, dst, "10.70.0.1:7777", "10.9.0.2:7777"); err != nil {
		t.Errorf("the datagram to the remapped address did not arrive at the real one: %v", err)
	} else if from.(*net.UDPAddr).IP.String() != "10.9.0.1" {
		t.Errorf("the datagram came from %v, want 10.9.0.1 (no source NAT)", from)
	}

	if out, err := src.Run("ping", "-c", "1", "-W", "1", "10.70.0.3"); err == nil {
		t.Errorf("an address without a host answered:\n%s", out)
	}
	got, err := a.Counters(rs.Table, rs.Family)
	if err != nil {
		t.Fatal(err)
	}
	if got["destination"] != 1 {
		t.Errorf("counter destination = %d, want 1", got["destination"])
	}
}
