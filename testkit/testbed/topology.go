package testbed

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// Addresses of both sides: the same pod CIDR and the same pod addresses on
// purpose, the case remapping exists for. The gateway pods' addresses
// differ, and each side has a pod at the address of the other side's
// gateway pod: after translation, a packet for that pod carries the
// address of the gateway it crosses.
var (
	PodCIDR      = netip.MustParsePrefix("10.244.0.0/16")
	ExternalCIDR = netip.MustParsePrefix("10.70.0.0/16")
	// GatewayIPs are the gateway pods' addresses, side A's then side B's.
	GatewayIPs = [2]netip.Addr{netip.MustParseAddr("10.244.0.10"), netip.MustParseAddr("10.244.0.20")}
	// PodIPs are the addresses of the pods of both sides.
	PodIPs = []netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("10.244.2.7")}
	// FarPodIP is the address of each side's pod on its second node, the
	// node without the gateway pod.
	FarPodIP = netip.MustParseAddr("10.244.3.9")
	// Node2IP is the address of each side's second node, on its link to
	// the first; the first node's end of that link is node1LinkIP.
	Node2IP     = netip.MustParseAddr("172.19.0.2")
	node1LinkIP = netip.MustParseAddr("172.19.0.1")
	// podGateway is the on-link next hop of every pod, answered by the node
	// (as Calico does).
	podGateway = netip.MustParseAddr("169.254.1.1")
)

// The IPv6 twins of the addresses above, which dual-stack sides have
// besides: again the same pod range on both sides. The underlay (the
// nodes' and gateway pods' addresses the overlay uses, the internet link)
// stays IPv4.
var (
	PodCIDR6 = netip.MustParsePrefix("fd44::/48")
	// GatewayIPs6 are the gateway pods' IPv6 addresses, side A's then B's.
	GatewayIPs6 = [2]netip.Addr{netip.MustParseAddr("fd44::10"), netip.MustParseAddr("fd44::20")}
	// PodIPs6 are the IPv6 addresses of the pods of PodIPs.
	PodIPs6 = []netip.Addr{netip.MustParseAddr("fd44:0:0:1::5"), netip.MustParseAddr("fd44:0:0:2::7")}
	// FarPodIP6 is the far pod's IPv6 address.
	FarPodIP6 = netip.MustParseAddr("fd44:0:0:3::9")
	// Node2IP6 and node1LinkIP6 are the ends of the link between the
	// nodes.
	Node2IP6     = netip.MustParseAddr("fd19::2")
	node1LinkIP6 = netip.MustParseAddr("fd19::1")
	// podGateway6 is the pods' on-link IPv6 next hop: a link-local address,
	// as Calico's fe80::ecee:eeff:feee:eeee.
	podGateway6 = netip.MustParseAddr("fe80::1")
)

// Side is one cluster: a node with its gateway pod and its pods, and a
// second node with one pod, routed to the first as a CNI routes between
// nodes.
type Side struct {
	// Name is "a" or "b".
	Name string
	// Node is the network namespace of the node running the gateway pod.
	Node *netns.NS
	// Node2 is the second node's network namespace, FarPod its pod.
	Node2, FarPod *netns.NS
	// Gateway is the gateway pod's network namespace.
	Gateway *netns.NS
	// Pods are the pods' network namespaces, with addresses PodIPs, and
	// last the pod at the other side's gateway address.
	Pods []*netns.NS
	// GatewayIP is the gateway pod's address; GatewayIP6 its IPv6 one,
	// invalid unless the side is dual-stack.
	GatewayIP, GatewayIP6 netip.Addr
	// NodeIP is the node's own address.
	NodeIP netip.Addr
	// WAN is the gateway's address on the internet link.
	WAN netip.Addr
}

// Topology is two sides joined by their gateways' internet link.
type Topology struct {
	A, B      *Side
	dualStack bool
	all       []*netns.NS
}

// WANs are the gateways' addresses on the internet link, side A's then B's,
// with the link's prefix length; WANs6 are those of an IPv6-only internet
// link.
var (
	WANs  = [2]netip.Prefix{netip.MustParsePrefix("192.0.2.1/24"), netip.MustParsePrefix("192.0.2.2/24")}
	WANs6 = [2]netip.Prefix{netip.MustParsePrefix("fd50::1/64"), netip.MustParsePrefix("fd50::2/64")}
)

// Build creates the namespaces and links of two sides, dual-stack ones
// (with the IPv6 addresses too) when dualStack is set, joined by an
// IPv6-only internet link (WANs6) when ipv6WAN is set, an IPv4-only one
// (WANs) otherwise. Close deletes them.
func Build(dualStack, ipv6WAN bool) (*Topology, error) {
	t := &Topology{dualStack: dualStack}
	wans := WANs
	if ipv6WAN {
		wans = WANs6
	}
	var err error
	if t.A, err = t.side("a", netip.MustParseAddr("172.18.0.1"), wans[0].Addr(), 0); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	if t.B, err = t.side("b", netip.MustParseAddr("172.18.0.2"), wans[1].Addr(), 1); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	if err := netns.Veth(t.A.Gateway, "wan0", t.B.Gateway, "wan0"); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	for i, s := range []*Side{t.A, t.B} {
		if _, err := s.Gateway.Run("ip", "addr", "add", wans[i].String(), "dev", "wan0", "nodad"); err != nil {
			return nil, errors.Join(err, t.Close())
		}
	}
	return t, nil
}

func (t *Topology) create(prefix string) (*netns.NS, error) {
	ns, err := netns.Create(prefix)
	if err != nil {
		return nil, err
	}
	t.all = append(t.all, ns)
	return ns, nil
}

// side builds a node with the gateway pod and the pods wired to it; the
// last pod has the address of the peer's gateway pod. i is 0 for side A, 1
// for B.
func (t *Topology) side(name string, nodeIP, wan netip.Addr, i int) (*Side, error) {
	s := &Side{Name: name, NodeIP: nodeIP, WAN: wan, GatewayIP: GatewayIPs[i]}
	ips, peerGateway := slices.Clone(PodIPs), GatewayIPs[1-i]
	var ips6 []netip.Addr
	if t.dualStack {
		s.GatewayIP6 = GatewayIPs6[i]
		ips6 = append(slices.Clone(PodIPs6), GatewayIPs6[1-i])
	}
	var err error
	if s.Node, err = t.create(name + "-node"); err != nil {
		return nil, err
	}
	run := func(ns *netns.NS, args ...string) {
		if err == nil {
			_, err = ns.Run(args[0], args[1:]...)
		}
	}
	run(s.Node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	run(s.Node, "ip", "addr", "add", nodeIP.String()+"/32", "dev", "lo")
	if t.dualStack {
		run(s.Node, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	}
	if err != nil {
		return nil, err
	}
	if s.Gateway, err = t.create(name + "-gw"); err != nil {
		return nil, err
	}
	if err := plugPod(s.Node, s.Gateway, "vgw", s.GatewayIP, s.GatewayIP6); err != nil {
		return nil, err
	}
	for i, ip := range append(ips, peerGateway) {
		pod, err := t.create(fmt.Sprintf("%s-pod%d", name, i+1))
		if err != nil {
			return nil, err
		}
		var ip6 netip.Addr
		if t.dualStack {
			ip6 = ips6[i]
		}
		if err := plugPod(s.Node, pod, fmt.Sprintf("vpod%d", i+1), ip, ip6); err != nil {
			return nil, err
		}
		s.Pods = append(s.Pods, pod)
	}
	if err := t.secondNode(s); err != nil {
		return nil, err
	}
	return s, nil
}

// secondNode adds Node2, joined to the first node by a link of their own,
// with FarPod on it: each node routes the other's pods through that link.
func (t *Topology) secondNode(s *Side) error {
	var err error
	if s.Node2, err = t.create(s.Name + "-node2"); err != nil {
		return err
	}
	if s.FarPod, err = t.create(s.Name + "-farpod"); err != nil {
		return err
	}
	if err := netns.Veth(s.Node, "vnode2", s.Node2, "vnode1"); err != nil {
		return err
	}
	var farIP6 netip.Addr
	if t.dualStack {
		farIP6 = FarPodIP6
	}
	if err := plugPod(s.Node2, s.FarPod, "vpod1", FarPodIP, farIP6); err != nil {
		return err
	}
	type command struct {
		ns   *netns.NS
		args []string
	}
	commands := []command{
		{s.Node2, []string{"sysctl", "-qw", "net.ipv4.ip_forward=1"}},
		{s.Node, []string{"ip", "addr", "add", node1LinkIP.String() + "/24", "dev", "vnode2"}},
		{s.Node2, []string{"ip", "addr", "add", Node2IP.String() + "/24", "dev", "vnode1"}},
		{s.Node, []string{"ip", "route", "add", FarPodIP.String() + "/32", "via", Node2IP.String(), "dev", "vnode2"}},
		{s.Node2, []string{"ip", "route", "add", "default", "via", node1LinkIP.String(), "dev", "vnode1"}},
	}
	if t.dualStack {
		commands = append(commands,
			command{s.Node2, []string{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"}},
			command{s.Node, []string{"ip", "addr", "add", node1LinkIP6.String() + "/64", "dev", "vnode2", "nodad"}},
			command{s.Node2, []string{"ip", "addr", "add", Node2IP6.String() + "/64", "dev", "vnode1", "nodad"}},
			command{s.Node, []string{"ip", "-6", "route", "add", FarPodIP6.String() + "/128", "via", Node2IP6.String(), "dev", "vnode2"}},
			command{s.Node2, []string{"ip", "-6", "route", "add", "default", "via", node1LinkIP6.String(), "dev", "vnode1"}})
	}
	for _, c := range commands {
		if _, err := c.ns.Run(c.args[0], c.args[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// plugPod wires a pod namespace to the node as a CNI would: a veth, the
// pod's address as a /32, a default route through an on-link address the
// node answers for, and a host route to the pod on the node; the same for
// IPv6 when ip6 is valid, with a link-local next hop and without duplicate
// address detection, which would keep the address unusable for a while.
func plugPod(node, pod *netns.NS, hostSide string, ip, ip6 netip.Addr) error {
	if err := netns.Veth(node, hostSide, pod, "eth0"); err != nil {
		return err
	}
	out, err := node.Run("cat", "/sys/class/net/"+hostSide+"/address")
	if err != nil {
		return err
	}
	mac := strings.TrimSpace(out)
	inPod := [][]string{
		{"ip", "addr", "add", ip.String() + "/32", "dev", "eth0"},
		{"ip", "route", "add", podGateway.String(), "dev", "eth0", "scope", "link"},
		{"ip", "route", "add", "default", "via", podGateway.String(), "dev", "eth0"},
		{"ip", "neigh", "add", podGateway.String(), "lladdr", mac, "dev", "eth0", "nud", "permanent"},
	}
	onNode := [][]string{{"ip", "route", "add", ip.String() + "/32", "dev", hostSide}}
	if ip6.IsValid() {
		inPod = append(inPod,
			[]string{"ip", "addr", "add", ip6.String() + "/128", "dev", "eth0", "nodad"},
			[]string{"ip", "-6", "route", "add", "default", "via", podGateway6.String(), "dev", "eth0"},
			[]string{"ip", "-6", "neigh", "add", podGateway6.String(), "lladdr", mac, "dev", "eth0", "nud", "permanent"})
		onNode = append(onNode, []string{"ip", "-6", "route", "add", ip6.String() + "/128", "dev", hostSide})
	}
	for _, args := range inPod {
		if _, err := pod.Run(args[0], args[1:]...); err != nil {
			return err
		}
	}
	for _, args := range onNode {
		if _, err := node.Run(args[0], args[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// Close deletes every namespace of the topology.
func (t *Topology) Close() error {
	var errs []error
	for _, ns := range t.all {
		if err := ns.Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	t.all = nil
	return errors.Join(errs...)
}
