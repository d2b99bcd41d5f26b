package overlay

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/dataplane/route"
	"github.com/peerlink/peerlink/internal/testenv/netns"
)

func TestMAC(t *testing.T) {
	if got := MAC(netip.MustParseAddr("10.244.0.10")).String(); got != "02:50:0a:f4:00:0a" {
		t.Errorf("MAC(10.244.0.10) = %s", got)
	}
}

func TestParseKind(t *testing.T) {
	for _, ok := range []string{"auto", "geneve", "vxlan"} {
		if _, err := ParseKind(ok); err != nil {
			t.Errorf("ParseKind(%q): %v", ok, err)
		}
	}
	if _, err := ParseKind("gre"); err == nil {
		t.Error("ParseKind accepted gre")
	}
}

// TestOverlayCarriesTraffic joins a "node" and a "gateway" namespace with a
// veth, gives each an overlay link in metadata mode, and sends a ping from
// the node to an address of the gateway through a route that encapsulates
// towards the gateway's underlay address.
func TestOverlayCarriesTraffic(t *testing.T) {
	netns.RequirePrivileged(t)
	node := netns.New(t, "node")
	gw := netns.New(t, "gw")
	if err := netns.Veth(node, "eth0", gw, "eth0"); err != nil {
		t.Fatal(err)
	}
	node.MustRun(t, "ip", "addr", "add", "192.168.50.1/24", "dev", "eth0")
	gw.MustRun(t, "ip", "addr", "add", "192.168.50.2/24", "dev", "eth0")
	gw.MustRun(t, "ip", "addr", "add", "10.71.2.7/32", "dev", "lo")
	node.MustRun(t, "ip", "addr", "add", "10.244.1.5/32", "dev", "lo")
	nodeIP, gwIP := netip.MustParseAddr("192.168.50.1"), netip.MustParseAddr("192.168.50.2")

	nh, gh := node.Netlink(t), gw.Netlink(t)
	kind, err := Detect(nh, Auto)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("overlay kind on this kernel: %s", kind)
	if _, err := Detect(nh, Geneve); err != nil && !errors.Is(err, ErrNotSupported) {
		t.Errorf("Detect(geneve) = %v, want nil or ErrNotSupported", err)
	}

	for _, side := range []struct {
		ns   *netns.NS
		self netip.Addr
	}{{node, nodeIP}, {gw, gwIP}} {
		h := side.ns.Netlink(t)
		want := Link{Name: "plovl", Kind: kind, Underlay: side.self}
		if changed, err := Ensure(h, want); err != nil || !changed {
			t.Fatalf("Ensure in %s = %v, %v", side.ns.Name, changed, err)
		}
		if changed, err := Ensure(h, want); err != nil || changed {
			t.Fatalf("second Ensure in %s = %v, %v; want no change", side.ns.Name, changed, err)
		}
	}
	if out := gw.MustRun(t, "ip", "-d", "link", "show", "plovl"); !strings.Contains(out, "external") || !strings.Contains(out, MAC(gwIP).String()) {
		t.Errorf("overlay link:\n%s", out)
	}

	apply := func(ns *netns.NS, s route.State) {
		a, err := route.NewApplier(ns.Handle)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if _, err := a.Apply(s); err != nil {
			t.Fatal(err)
		}
	}
	apply(node, route.State{
		Links:     []route.Link{{Name: "plovl", Router: true}},
		Neighbors: []route.Neighbor{{Link: "plovl", IP: gwIP, MAC: MAC(gwIP)}},
		Routes:    []route.Route{{Table: 1803, Dst: netip.MustParsePrefix("10.71.0.0/16"), Link: "plovl", Via: gwIP, Encap: gwIP, VNI: VNI}},
		Rules:     []route.Rule{{Priority: 1803, Table: 1803}},
		Tables:    []int{1803}, RulePriorities: []int{1803},
	})
	apply(gw, route.State{
		Links:     []route.Link{{Name: "plovl", Router: true}},
		Neighbors: []route.Neighbor{{Link: "plovl", IP: nodeIP, MAC: MAC(nodeIP)}},
		Routes:    []route.Route{{Table: 1802, Dst: netip.MustParsePrefix("10.244.0.0/16"), Link: "plovl", Via: nodeIP, Encap: nodeIP, VNI: VNI}},
		Rules:     []route.Rule{{Priority: 1802, Table: 1802}},
		Tables:    []int{1802}, RulePriorities: []int{1802},
	})
	// Both directions cross the overlay: the request by the node's route,
	// the reply by the gateway's.
	node.MustRun(t, "ping", "-c", "2", "-W", "2", "-I", "10.244.1.5", "10.71.2.7")
	for _, ns := range []*netns.NS{node, gw} {
		l, err := ns.Netlink(t).LinkByName("plovl")
		if err != nil {
			t.Fatal(err)
		}
		if s := l.Attrs().Statistics; s == nil || s.RxPackets < 2 || s.TxPackets < 2 {
			t.Errorf("overlay link in %s: statistics %+v, want at least 2 packets each way", ns.Name, s)
		}
	}

	if err := Remove(gh, "plovl"); err != nil {
		t.Fatal(err)
	}
	if err := Remove(gh, "plovl"); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}
