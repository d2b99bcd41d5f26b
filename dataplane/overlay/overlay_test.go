package overlay

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/route"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// TestOverlayCarriesTraffic joins a "node" and a "gateway" namespace with a
// veth, gives each an overlay link in metadata mode, and sends a ping from
// the node to an address of the gateway through a route that encapsulates
// towards the gateway's underlay address.
func TestOverlayCarriesTraffic(t *testing.T) {
	node, gw := netns.Joined(t,
		netns.End{Prefix: "node", Link: "eth0", Addr: "192.168.50.1/24"},
		netns.End{Prefix: "gw", Link: "eth0", Addr: "192.168.50.2/24"})
	gw.MustRun(t, "ip", "addr", "add", "10.71.2.7/32", "dev", "lo")
	node.MustRun(t, "ip", "addr", "add", "10.244.1.5/32", "dev", "lo")
	nodeIP, gwIP := netip.MustParseAddr("192.168.50.1"), netip.MustParseAddr("192.168.50.2")

	nh, gh := node.Netlink(t), gw.Netlink(t)
	kind, err := Detect(nh, Auto)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("overlay kind on this kernel: %s", kind)
	if _, err := Detect(nh, plan.Geneve); err != nil && !errors.Is(err, ErrNotSupported) {
		t.Errorf("Detect(geneve) = %v, want nil or ErrNotSupported", err)
	}

	// Each side gets an overlay link, which a second Ensure keeps, and a
	// route to the other side's range through it.
	for _, side := range []struct {
		ns         *netns.NS
		self, peer netip.Addr
		table      int
		dst        string
	}{{node, nodeIP, gwIP, 1803, "10.71.0.0/16"}, {gw, gwIP, nodeIP, 1802, "10.244.0.0/16"}} {
		h := side.ns.Netlink(t)
		want := plan.Overlay{Name: "plovl", Kind: kind, Underlay: side.self}
		if changed, err := Ensure(h, want); err != nil || !changed {
			t.Fatalf("Ensure in %s = %v, %v", side.ns.Name, changed, err)
		}
		if changed, err := Ensure(h, want); err != nil || changed {
			t.Fatalf("second Ensure in %s = %v, %v; want no change", side.ns.Name, changed, err)
		}
		a, err := route.NewApplier(side.ns.Handle)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if _, err := a.Apply(plan.Routing{
			Links:     []plan.Link{{Name: "plovl", Router: true}},
			Neighbors: []plan.Neighbor{{Link: "plovl", IP: side.peer, MAC: plan.OverlayMAC(side.peer)}},
			Routes: []plan.Route{{Table: side.table, Dst: netip.MustParsePrefix(side.dst), Link: "plovl",
				Via: side.peer, Encap: side.peer, VNI: plan.VNI}},
			Rules:  []plan.PolicyRule{{Priority: side.table, Table: side.table}},
			Tables: []int{side.table}, RulePriorities: []int{side.table},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if out := gw.MustRun(t, "ip", "-d", "link", "show", "plovl"); !strings.Contains(out, "external") || !strings.Contains(out, plan.OverlayMAC(gwIP).String()) {
		t.Errorf("overlay link:\n%s", out)
	}
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

	// A restarted agent detects again beside its own link and beside a
	// CNI's VXLAN device holding VNI 1 on the kernel's default port, as
	// Flannel's flannel.1 does on every node of a Flannel cluster.
	node.MustRun(t, "ip", "link", "add", "flannel.1", "type", "vxlan", "id", "1", "dstport", "8472", "nolearning")
	if k, err := Detect(nh, plan.VXLAN); err != nil || k != plan.VXLAN {
		t.Errorf("Detect(vxlan) beside flannel.1 and the overlay link = %q, %v; want vxlan", k, err)
	}

	if err := Remove(gh, "plovl"); err != nil {
		t.Fatal(err)
	}
	if err := Remove(gh, "plovl"); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}
