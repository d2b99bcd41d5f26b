package nat

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// filterRuleset is an ingress filter on link "in": UDP port 9999 from one
// host to the namespace's own address passes, then sources outside
// "allowed", anything for the namespace itself and destinations outside
// "local" are dropped, each counted apart.
func filterRuleset() plan.Ruleset {
	return plan.Ruleset{
		Table: "peerlink-filter-test",
		Sets: []plan.Set{
			{Name: "allowed", Prefixes: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")}},
			{Name: "local", Prefixes: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
		},
		Counters: []string{"source", "self", "destination"},
		Chains: []plan.Chain{{Name: "ingress", Type: plan.Filter, Hook: plan.Prerouting, Priority: -150, Rules: []plan.Rule{
			{Comment: "probe", IIF: "in", Src: netip.MustParseAddr("10.9.0.1"), Dst: netip.MustParseAddr("10.9.0.2"), UDPDstPort: 9999, Verdict: plan.Accept},
			{IIF: "in", SrcNotIn: "allowed", Counter: "source", Verdict: plan.Drop},
			{IIF: "in", DstLocal: true, Counter: "self", Verdict: plan.Drop},
			{IIF: "in", DstNotIn: "local", Counter: "destination", Verdict: plan.Drop},
		}}},
	}
}

// TestFilterInKernel sends packets of each kind through the filter of a
// real namespace and checks which pass and which counter each drop lands
// in.
func TestFilterInKernel(t *testing.T) {
	src, dst := netns.Joined(t,
		netns.End{Prefix: "fsrc", Link: "out", Addr: "10.9.0.1/24"},
		netns.End{Prefix: "fdst", Link: "in", Addr: "10.9.0.2/24"})
	src.MustRun(t, "ip", "addr", "add", "10.10.0.1/24", "dev", "out")
	src.MustRun(t, "ip", "route", "add", "10.244.0.0/16", "via", "10.9.0.2")
	src.MustRun(t, "ip", "route", "add", "10.50.0.0/16", "via", "10.9.0.2")
	rs := filterRuleset()
	a := applyOnce(t, dst, rs)

	// The probe passes.
	if _, err := sendUDP(t, src, dst, "10.9.0.2:9999", "10.9.0.2:9999"); err != nil {
		t.Errorf("the allowed probe did not arrive: %v", err)
	}

	ping := func(args ...string) {
		t.Helper()
		if out, err := src.Run("ping", append([]string{"-c", "1", "-W", "1"}, args...)...); err == nil {
			t.Errorf("ping %v answered through the filter:\n%s", args, out)
		}
	}
	counters := func() map[string]uint64 {
		t.Helper()
		c, err := a.Counters(rs.Table, rs.Family)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ping("-I", "10.10.0.1", "10.9.0.2") // source outside "allowed"
	ping("10.9.0.2")                    // the namespace itself
	ping("10.50.0.1")                   // a destination outside "local"
	got := counters()
	for _, name := range []string{"source", "self", "destination"} {
		if got[name] != 1 {
			t.Errorf("counter %s = %d, want 1 (all: %v)", name, got[name], got)
		}
	}
	// An allowed source to a local range passes the filter (and finds no
	// host there): no counter moves.
	_, _ = src.Run("ping", "-c", "1", "-W", "1", "10.244.5.1")
	if after := counters(); after["source"] != 1 || after["self"] != 1 || after["destination"] != 1 {
		t.Errorf("a packet the filter lets through was counted as dropped: %v", after)
	}
	// A deleted counter makes Apply write the table again.
	dst.MustRun(t, "nft", "delete", "rule", "ip", rs.Table, "ingress", "handle",
		ruleHandle(t, dst, rs.Table, "self"))
	dst.MustRun(t, "nft", "delete", "counter", "ip", rs.Table, "self")
	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("Apply after a counter was deleted = %v, %v; want a write", changed, err)
	}
}

// applyOnce writes rs into ns with a new applier, which it returns, and
// checks that applying it again writes nothing.
func applyOnce(t *testing.T, ns *netns.NS, rs plan.Ruleset) *Applier {
	t.Helper()
	a, err := NewApplier(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("Apply = %v, %v; want a write", changed, err)
	}
	if changed, err := a.Apply(rs); err != nil || changed {
		t.Fatalf("second Apply = %v, %v; want no write", changed, err)
	}
	return a
}

// sendUDP sends a datagram from src to the address to and waits up to 2 s
// for it on listen in dst; it returns the sender's address as dst saw it.
func sendUDP(t *testing.T, src, dst *netns.NS, to, listen string) (net.Addr, error) {
	t.Helper()
	return sendUDPFrom(t, src, dst, "", to, listen)
}

// sendUDPFrom is sendUDP from the address local in src (any when empty).
// The addresses are of either family.
func sendUDPFrom(t *testing.T, src, dst *netns.NS, local, to, listen string) (net.Addr, error) {
	t.Helper()
	var l net.PacketConn
	if err := dst.Do(func() (err error) { l, err = net.ListenPacket("udp", listen); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := src.Do(func() error {
		var d net.Dialer
		if local != "" {
			a, err := net.ResolveUDPAddr("udp", local)
			if err != nil {
				return err
			}
			d.LocalAddr = a
		}
		c, err := d.Dial("udp", to)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("ping"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_ = l.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, from, err := l.ReadFrom(make([]byte, 16))
	return from, err
}

// ruleHandle finds the handle of the rule using counter name.
func ruleHandle(t *testing.T, ns *netns.NS, table, counter string) string {
	t.Helper()
	out := ns.MustRun(t, "nft", "-a", "list", "chain", "ip", table, "ingress")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `counter name "`+counter+`"`) {
			if _, h, ok := strings.Cut(line, "# handle "); ok {
				return strings.TrimSpace(h)
			}
		}
	}
	t.Fatalf("no rule counting in %s:\n%s", counter, out)
	return ""
}
