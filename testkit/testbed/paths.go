package testbed

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/nat"
	"github.com/peerlink/peerlink/dataplane/overlay"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/route"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// Pair is a sender and a receiver namespace and the receiver's address.
type Pair struct {
	Sender, Receiver *netns.NS
	// Dst is the address the sender sends to.
	Dst     netip.Addr
	cleanup []func() error
}

// Close releases what the pair holds.
func (p *Pair) Close() error {
	var errs []error
	for i := len(p.cleanup) - 1; i >= 0; i-- {
		errs = append(errs, p.cleanup[i]())
	}
	return errors.Join(errs...)
}

func (p *Pair) ns(prefix string) (*netns.NS, error) {
	ns, err := netns.Create(prefix)
	if err != nil {
		return nil, err
	}
	p.cleanup = append(p.cleanup, ns.Delete)
	return ns, nil
}

// veth joins two fresh namespaces with a veth, 10.10.0.1/24 and .2/24.
func veth() (*Pair, error) {
	p := &Pair{}
	var err error
	if p.Sender, err = p.ns("snd"); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	if p.Receiver, err = p.ns("rcv"); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	if err := netns.Veth(p.Sender, "eth0", p.Receiver, "eth0"); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	for _, x := range []struct {
		ns   *netns.NS
		addr string
	}{{p.Sender, "10.10.0.1/24"}, {p.Receiver, "10.10.0.2/24"}} {
		if _, err := x.ns.Run("ip", "addr", "add", x.addr, "dev", "eth0"); err != nil {
			return nil, errors.Join(err, p.Close())
		}
	}
	p.Dst = netip.MustParseAddr("10.10.0.2")
	return p, nil
}

// BareVeth is two namespaces joined by a veth: the ceiling of pod to pod.
func BareVeth() (*Pair, error) { return veth() }

// BareWireGuard is two namespaces joined by a veth and by a tunnel of the
// embedded wireguard-go (the same library and version as the gateways',
// each side a process of its own as two gateways are), with nothing else:
// no NAT, no overlay, no policy routing. bin is the wgbare runner
// (BuildWGBare); its logs go to dir. Dst is the receiver's tunnel address.
func BareWireGuard(bin, dir string, mtu int) (*Pair, error) {
	p, err := veth()
	if err != nil {
		return nil, err
	}
	kSnd, err1 := wgtypes.GeneratePrivateKey()
	kRcv, err2 := wgtypes.GeneratePrivateKey()
	if err := errors.Join(err1, err2); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	sides := []struct {
		ns        *netns.NS
		key, peer wgtypes.Key
		self      netip.Addr
		endpoint  string
	}{
		{p.Sender, kSnd, kRcv.PublicKey(), dataplane.ClientAddress, "10.10.0.2:51840"},
		{p.Receiver, kRcv, kSnd.PublicKey(), dataplane.ServerAddress, "10.10.0.1:51840"},
	}
	for _, s := range sides {
		agent, err := start(s.ns, filepath.Join(dir, "wgbare-"+s.ns.Name+".log"), bin,
			"--mtu="+strconv.Itoa(mtu),
			"--address="+netip.PrefixFrom(s.self, dataplane.TunnelPrefix.Bits()).String(),
			"--private-key="+s.key.String(), "--peer-public-key="+s.peer.String(), "--endpoint="+s.endpoint)
		if err != nil {
			return nil, errors.Join(err, p.Close())
		}
		p.cleanup = append(p.cleanup, func() error { return agent.Stop(5 * time.Second) })
	}
	p.Dst = dataplane.ServerAddress
	return p, nil
}

// Addresses of the pods behind the bare tunnel, sender's then receiver's:
// routed through the tunnel with no translation.
var barePodIPs = [2]netip.Addr{netip.MustParseAddr("10.1.0.2"), netip.MustParseAddr("10.2.0.2")}

// PodsOverWireGuard is pod to pod through a bare tunnel: the two namespaces
// of BareWireGuard now route, and each has a pod plugged in as the testbed
// plugs pods into nodes, with the tunnel's MTU (so TCP segments fit it
// without MSS clamping). That is the least a tunnel between two pod
// networks needs: no NAT, no overlay, no policy routing, no agent. Dst is
// the receiving pod's address.
func PodsOverWireGuard(bin, dir string, mtu int) (*Pair, error) {
	p, err := BareWireGuard(bin, dir, mtu)
	if err != nil {
		return nil, err
	}
	routers := [2]*netns.NS{p.Sender, p.Receiver}
	var pods [2]*netns.NS
	for i, name := range []string{"wgpodsnd", "wgpodrcv"} {
		if pods[i], err = p.ns(name); err != nil {
			return nil, errors.Join(err, p.Close())
		}
		if err := plugPod(routers[i], pods[i], "pod0", barePodIPs[i], netip.Addr{}); err != nil {
			return nil, errors.Join(err, p.Close())
		}
		for _, c := range []struct {
			ns   *netns.NS
			args []string
		}{
			{routers[i], []string{"sysctl", "-qw", "net.ipv4.ip_forward=1"}},
			{routers[i], []string{"ip", "route", "add", barePodIPs[1-i].String() + "/32", "dev", "wgbare"}},
			{pods[i], []string{"ip", "link", "set", "eth0", "mtu", strconv.Itoa(mtu)}},
		} {
			if _, err := c.ns.Run(c.args[0], c.args[1:]...); err != nil {
				return nil, errors.Join(err, p.Close())
			}
		}
	}
	p.Sender, p.Receiver, p.Dst = pods[0], pods[1], barePodIPs[1]
	return p, nil
}

// FabricNode is a pod, a node with the fabric's plan for peers peers
// applied (one remapped pod /24 and one external /24 each, every peer with
// a gateway of its own), and a namespace standing for the gateway of the
// last peer, which receives the pod's traffic through the overlay. Dst is an
// address in the last peer's pod range. overlay.Auto picks the kind as the
// agents do.
func FabricNode(peers int, kind plan.OverlayKind) (*Pair, error) {
	if peers < 1 || peers > 1024 {
		return nil, fmt.Errorf("peers %d: must be in 1-1024", peers)
	}
	p := &Pair{}
	var err error
	var node *netns.NS
	if node, err = p.ns("fnode"); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	if p.Sender, err = p.ns("fpod"); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	if p.Receiver, err = p.ns("fgw"); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	nh, err := netlink.NewHandleAt(node.Handle)
	if err != nil {
		return nil, errors.Join(err, p.Close())
	}
	kind, err = overlay.Detect(nh, kind)
	nh.Close()
	if err != nil {
		return nil, errors.Join(err, p.Close())
	}
	nodeIP := netip.MustParseAddr("172.18.0.1")
	gatewayIP := GatewayIPs[0]
	setup := [][]string{
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "addr", "add", nodeIP.String() + "/32", "dev", "lo"},
	}
	for _, args := range setup {
		if _, err := node.Run(args[0], args[1:]...); err != nil {
			return nil, errors.Join(err, p.Close())
		}
	}
	if err := plugPod(node, p.Sender, "vpod", PodIPs[0], netip.Addr{}); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	if err := plugPod(node, p.Receiver, "vgw", gatewayIP, netip.Addr{}); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	// The pod's MTU fits the overlay's, as a CNI sets it.
	if _, err := p.Sender.Run("ip", "link", "set", "eth0", "mtu", "1450"); err != nil {
		return nil, errors.Join(err, p.Close())
	}

	facts := dataplane.FabricFacts{
		Node: nodeIP, OverlayKind: kind, OverlayMTU: 1450,
		PodCIDRs: []netip.Prefix{PodCIDR}, UnknownSource: dataplane.UnknownSource(ExternalCIDR),
	}
	for i := range peers {
		// Pod ranges in 172.16.0.0/12, external ranges in 10.128.0.0/9, a
		// /24 each; every gateway but the last at an address nobody has.
		podRange := netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(16 + i/256), byte(i % 256), 0}), 24)
		extRange := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i/256), byte(i % 256), 0}), 24)
		gw := netip.AddrFrom4([4]byte{10, 244, byte(100 + i/256), byte(i % 256)})
		if i == peers-1 {
			gw = gatewayIP
			p.Dst = podRange.Addr().Next()
		}
		facts.Gateways = append(facts.Gateways, dataplane.FabricGateway{
			Name: "peer-" + strconv.Itoa(i), Address: gw, Node: nodeIP, Local: true,
			Ranges: []netip.Prefix{podRange, extRange},
		})
	}
	fabricPlan, err := dataplane.PlanFabric(facts)
	if err != nil {
		return nil, errors.Join(err, p.Close())
	}
	if err := applyFabric(node, fabricPlan); err != nil {
		return nil, errors.Join(err, p.Close())
	}

	// The receiving gateway: an overlay link, the destination on its
	// loopback, replies straight back through its pod link.
	gh, err := netlink.NewHandleAt(p.Receiver.Handle)
	if err != nil {
		return nil, errors.Join(err, p.Close())
	}
	defer gh.Close()
	if _, err := overlay.Ensure(gh, plan.Overlay{Name: dataplane.OverlayLink, Kind: kind, Underlay: gatewayIP}); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	for _, args := range [][]string{
		{"ip", "link", "set", dataplane.OverlayLink, "up"},
		{"ip", "addr", "add", p.Dst.String() + "/32", "dev", "lo"},
		{"sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf." + dataplane.OverlayLink + ".rp_filter=0"},
	} {
		if _, err := p.Receiver.Run(args[0], args[1:]...); err != nil {
			return nil, errors.Join(err, p.Close())
		}
	}
	return p, nil
}

// applyFabric writes a fabric plan into ns as the fabric agent does.
func applyFabric(ns *netns.NS, plan dataplane.FabricPlan) error {
	ra, err := route.NewApplier(ns.Handle)
	if err != nil {
		return err
	}
	defer ra.Close()
	if _, err := overlay.Ensure(ra.Handle(), plan.Overlay); err != nil {
		return err
	}
	if _, err := ra.Apply(plan.Routes); err != nil {
		return err
	}
	na, err := nat.NewApplier(ns.Handle)
	if err != nil {
		return err
	}
	_, err = na.Apply(plan.NAT)
	return err
}
