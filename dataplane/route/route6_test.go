package route

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// TestApplyDualStack applies addresses, neighbors, routes, rules and
// unreachable defaults of both families, repairs hand edits of the IPv6
// side and removes both.
func TestApplyDualStack(t *testing.T) {
	ns, _ := netns.Joined(t, netns.End{Prefix: "route6", Link: "up0"}, netns.End{Prefix: "peer6", Link: "down0"})
	ns.MustRun(t, "ip", "link", "add", "ovl", "type", "vxlan", "external", "dstport", "4790")

	a := newTestApplier(t, ns)
	gw4, gw6 := netip.MustParseAddr("10.244.0.10"), netip.MustParseAddr("fd30::10")
	mac4, mac6 := net.HardwareAddr{2, 0x50, 10, 244, 0, 10}, net.HardwareAddr{2, 0x51, 1, 2, 3, 4}
	want := plan.Routing{
		Links: []plan.Link{{Name: "up0", MTU: 1400, Router: true, AcceptLocal: true}, {Name: "ovl", Router: true}},
		Addresses: []plan.Address{
			{Link: "up0", Prefix: netip.MustParsePrefix("169.254.18.1/30")},
			{Link: "up0", Prefix: netip.MustParsePrefix("fd44:1::1/64")},
		},
		Neighbors: []plan.Neighbor{{Link: "ovl", IP: gw4, MAC: mac4}, {Link: "ovl", IP: gw6, MAC: mac6}},
		Routes: []plan.Route{
			{Table: 1801, Dst: netip.MustParsePrefix("10.244.0.0/16"), Link: "up0"},
			{Table: 1801, Dst: netip.MustParsePrefix("fd44:1::/48"), Link: "up0"},
			{Table: 1801, Dst: netip.MustParsePrefix("0.0.0.0/0"), Unreachable: true},
			{Table: 1801, Dst: netip.MustParsePrefix("::/0"), Unreachable: true},
			{Table: 1802, Dst: netip.MustParsePrefix("10.71.0.0/16"), Link: "ovl", Via: gw4, Encap: gw4, VNI: 6091},
			{Table: 1802, Dst: netip.MustParsePrefix("fd71::/48"), Link: "ovl", Via: gw4, Encap: gw4, VNI: 6091},
			{Table: 1802, Dst: netip.MustParsePrefix("fd72::/48"), Link: "ovl", Via: gw6, Encap: gw6, VNI: 6091},
		},
		Rules: []plan.PolicyRule{
			{Priority: 1801, IIF: "ovl", Table: 1801},
			{Priority: 1802, Src: netip.MustParsePrefix("10.244.0.0/16"), Table: 1802},
			{Priority: 1802, Src: netip.MustParsePrefix("fd44:1::/48"), Table: 1802},
		},
		Tables:         []int{1801, 1802},
		RulePriorities: []int{1801, 1802},
		LocalExceptIIF: "ovl",
	}
	changes, err := a.Apply(want)
	if err != nil {
		t.Fatalf("Apply: %v (after %v)", err, changes)
	}

	// The IPv6 next hops are the link-local addresses of the neighbors'
	// MACs (modified EUI-64).
	hop4, hop6 := "fe80::50:aff:fef4:a", "fe80::51:1ff:fe02:304"
	contains := func(what, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s lacks %q:\n%s", what, w, out)
			}
		}
	}
	addrs := ns.MustRun(t, "ip", "-6", "addr", "show", "dev", "up0")
	contains("up0 addresses", addrs, "inet6 fd44:1::1/64 scope global nodad", "inet6 fe80::")
	for line := range strings.Lines(addrs) {
		if strings.Contains(line, "fd44:1::1/64") && strings.Contains(line, "tentative") {
			t.Errorf("fd44:1::1 should be usable at once:\n%s", addrs)
		}
	}
	contains("IPv6 neighbors", ns.MustRun(t, "ip", "-6", "neigh", "show", "dev", "ovl"),
		"fd30::10 lladdr 02:51:01:02:03:04 PERMANENT", hop4+" lladdr 02:50:0a:f4:00:0a PERMANENT", hop6+" lladdr 02:51:01:02:03:04 PERMANENT")
	contains("IPv6 table 1801", ns.MustRun(t, "ip", "-6", "route", "show", "table", "1801"), "fd44:1::/48 dev up0", "unreachable default")
	contains("IPv4 table 1801", ns.MustRun(t, "ip", "route", "show", "table", "1801"), "10.244.0.0/16 dev up0", "unreachable default")
	contains("IPv6 table 1802", ns.MustRun(t, "ip", "-6", "route", "show", "table", "1802"),
		"fd71::/48  encap ip id 6091 src 0.0.0.0 dst 10.244.0.10 ttl 0 tos 0 via "+hop4+" dev ovl",
		"fd72::/48  encap ip6 id 6091 src :: dst fd30::10 hoplimit 0 tc 0 csum via "+hop6+" dev ovl")
	rules6 := ns.MustRun(t, "ip", "-6", "rule")
	contains("IPv6 rules", rules6, "0:\tnot from all iif ovl lookup local", "1801:\tfrom all iif ovl lookup 1801", "1802:\tfrom fd44:1::/48 lookup 1802")
	if strings.Contains(rules6, "0:\tfrom all lookup local") || strings.Contains(rules6, "10.244") {
		t.Errorf("IPv6 rules:\n%s", rules6)
	}
	rules4 := ns.MustRun(t, "ip", "rule")
	contains("IPv4 rules", rules4, "1801:\tfrom all iif ovl lookup 1801", "1802:\tfrom 10.244.0.0/16 lookup 1802")
	if strings.Contains(rules4, "fd44") {
		t.Errorf("IPv4 rules:\n%s", rules4)
	}
	if conf := ns.MustRun(t, "sysctl", "-n", "net.ipv6.conf.up0.forwarding", "net.ipv6.conf.up0.force_forwarding", "net.ipv6.conf.ovl.force_forwarding"); conf != "1\n1\n1\n" {
		t.Errorf("up0 forwarding, force_forwarding, ovl force_forwarding = %q", conf)
	}

	if changes, err := a.Apply(want); err != nil || len(changes) != 0 {
		t.Fatalf("second Apply = %v, %v; want nothing written", changes, err)
	}

	ns.MustRun(t, "ip", "-6", "route", "del", "fd44:1::/48", "table", "1801")
	ns.MustRun(t, "ip", "-6", "route", "add", "fd99::/64", "dev", "up0", "table", "1801")
	ns.MustRun(t, "ip", "-6", "rule", "del", "priority", "1801")
	ns.MustRun(t, "ip", "-6", "rule", "add", "priority", "1802", "from", "all", "lookup", "main")
	ns.MustRun(t, "ip", "-6", "neigh", "add", "fd30::99", "lladdr", "02:00:00:00:00:99", "dev", "ovl", "nud", "permanent")
	ns.MustRun(t, "ip", "-6", "addr", "add", "fd99::1/64", "dev", "up0", "nodad")
	changes, err = a.Apply(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{
		"route fd44:1::/48 dev up0 table 1801: written", "route fd99::/64 table 1801: deleted",
		"ipv6 rule 1801: from all iif ovl lookup 1801: added", "neighbor fd30::99 dev ovl: deleted", "address fd99::1/64 dev up0: deleted",
	} {
		if !slices.Contains(changes, c) {
			t.Errorf("Apply after hand edits: changes %q lack %q", changes, c)
		}
	}
	if !slices.ContainsFunc(changes, func(c string) bool { return strings.HasPrefix(c, "ipv6 rule ") && strings.HasSuffix(c, ": deleted") }) {
		t.Errorf("Apply after hand edits: changes %q lack the deletion of the stray IPv6 rule at 1802", changes)
	}
	if changes, err := a.Apply(want); err != nil || len(changes) != 0 {
		t.Fatalf("Apply after repair = %v, %v; want nothing written", changes, err)
	}
	contains("up0 addresses after repair", ns.MustRun(t, "ip", "-6", "addr", "show", "dev", "up0"), "inet6 fe80::")

	if err := a.Remove(want); err != nil {
		t.Fatal(err)
	}
	for _, family := range []string{"-4", "-6"} {
		rules := ns.MustRun(t, "ip", family, "rule")
		if strings.Contains(rules, "1801:") || strings.Contains(rules, "1802:") || !strings.Contains(rules, "0:\tfrom all lookup local") || strings.Contains(rules, "not from") {
			t.Errorf("ip %s rule after Remove:\n%s", family, rules)
		}
		for _, table := range []string{"1801", "1802"} {
			if out := ns.MustRun(t, "ip", family, "route", "show", "table", table); out != "" {
				t.Errorf("ip %s route show table %s after Remove:\n%s", family, table, out)
			}
		}
	}
}

// TestApplyValidates refuses a routing the kernel could not follow before
// writing anything.
func TestApplyValidates(t *testing.T) {
	ns := netns.New(t, "route6v")
	netns.RequirePrivileged(t)
	a := newTestApplier(t, ns)
	bad := plan.Routing{
		Routes: []plan.Route{{Table: 1802, Dst: netip.MustParsePrefix("fd71::/48"), Link: "lo", Via: netip.MustParseAddr("10.244.0.10")}},
		Tables: []int{1802},
	}
	if changes, err := a.Apply(bad); err == nil || !strings.Contains(err.Error(), "Via 10.244.0.10 has no neighbor entry on link lo") || len(changes) != 0 {
		t.Errorf("Apply of an IPv6 route without a neighbor for its IPv4 next hop = %v, %v", changes, err)
	}
}

// TestIPv6OverOverlay sends IPv6 from a pod through the routing namespace,
// routed via an IPv4 next hop with an IPv4 encapsulation and via an IPv6
// next hop with an IPv6 encapsulation, and IPv4 via that IPv6 next hop, and finds both in VXLAN on the far
// namespace's underlay link and decapsulated on its overlay link, with the
// neighbor's MAC and the pod's destination.
func TestIPv6OverOverlay(t *testing.T) {
	ns, pod := netns.Joined(t, netns.End{Prefix: "route6", Link: "up0"}, netns.End{Prefix: "pod6", Link: "eth0"})
	far := netns.New(t, "far6")
	if err := netns.Veth(ns, "und0", far, "und0"); err != nil {
		t.Fatal(err)
	}
	pod.MustRun(t, "ip", "addr", "add", "fd44:1::2/64", "dev", "eth0", "nodad")
	pod.MustRun(t, "ip", "-6", "route", "add", "default", "via", "fd44:1::1")
	pod.MustRun(t, "ip", "addr", "add", "10.244.1.2/24", "dev", "eth0")
	pod.MustRun(t, "ip", "route", "add", "default", "via", "10.244.1.1")
	for _, c := range [][]string{
		{"ip", "addr", "add", "10.9.0.1/24", "dev", "und0"},
		{"ip", "addr", "add", "fd30::1/64", "dev", "und0", "nodad"},
		{"ip", "link", "add", "ovl", "type", "vxlan", "external", "dstport", "4790"},
	} {
		ns.MustRun(t, c[0], c[1:]...)
	}
	for _, c := range [][]string{
		{"ip", "addr", "add", "10.9.0.2/24", "dev", "und0"},
		{"ip", "addr", "add", "fd30::2/64", "dev", "und0", "nodad"},
		{"ip", "link", "add", "ovl", "type", "vxlan", "external", "dstport", "4790"},
		{"ip", "link", "set", "ovl", "up"},
	} {
		far.MustRun(t, c[0], c[1:]...)
	}

	a := newTestApplier(t, ns)
	// As on a node, the next hop is the far end's underlay address, which
	// the main table routes through another link (und0).
	far4, far6 := netip.MustParseAddr("10.9.0.2"), netip.MustParseAddr("fd30::2")
	mac4, mac6 := net.HardwareAddr{2, 0x50, 10, 9, 0, 2}, net.HardwareAddr{2, 0x51, 1, 2, 3, 4}
	want := plan.Routing{
		Links:     []plan.Link{{Name: "up0", Router: true}, {Name: "ovl", Router: true}},
		Addresses: []plan.Address{{Link: "up0", Prefix: netip.MustParsePrefix("fd44:1::1/64")}, {Link: "up0", Prefix: netip.MustParsePrefix("10.244.1.1/24")}},
		Neighbors: []plan.Neighbor{{Link: "ovl", IP: far4, MAC: mac4}, {Link: "ovl", IP: far6, MAC: mac6}},
		Routes: []plan.Route{
			{Table: 1802, Dst: netip.MustParsePrefix("fd44:2::/48"), Link: "ovl", Via: far4, Encap: far4, VNI: 6091},
			{Table: 1802, Dst: netip.MustParsePrefix("fd44:3::/48"), Link: "ovl", Via: far6, Encap: far6, VNI: 6091},
			// An IPv6-only cluster's IPv4 range (its external range, a
			// gateway's way back to its node): through an IPv6 next hop.
			{Table: 1802, Dst: netip.MustParsePrefix("10.71.0.0/16"), Link: "ovl", Via: far6, Encap: far6, VNI: 6091},
		},
		Rules:          []plan.PolicyRule{{Priority: 1802, IIF: "up0", Table: 1802}},
		Tables:         []int{1802},
		RulePriorities: []int{1802},
	}
	if changes, err := a.Apply(want); err != nil {
		t.Fatalf("Apply: %v (after %v)", err, changes)
	}
	// The kernel lists the IPv4 route through the IPv6 next hop as it was
	// written: a second Apply changes nothing.
	if changes, err := a.Apply(want); err != nil || len(changes) != 0 {
		t.Errorf("second Apply = %v, %v; want no changes", changes, err)
	}

	underlay, overlay := capture(t, far, "und0"), capture(t, far, "ovl")
	for _, tc := range []struct {
		dst   netip.Addr
		outer netip.Addr
		mac   net.HardwareAddr
	}{
		{netip.MustParseAddr("fd44:2::5"), far4, mac4},
		{netip.MustParseAddr("fd44:3::5"), far6, mac6},
		{netip.MustParseAddr("10.71.0.5"), far6, mac6},
	} {
		err := pod.Do(func() error {
			c, err := net.Dial("udp", netip.AddrPortFrom(tc.dst, 9).String())
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("peerlink"))
			return err
		})
		if err != nil {
			t.Fatalf("send to %s: %v", tc.dst, err)
		}
		if !waitFrame(t, underlay, func(f []byte) bool {
			dst, vni, inner, ok := vxlan(f)
			return ok && dst == tc.outer && vni == 6091 && isInner(inner, tc.mac, tc.dst)
		}) {
			t.Errorf("no VXLAN datagram to %s with VNI 6091 carrying %s to %s reached the far underlay", tc.outer, tc.mac, tc.dst)
		}
		if !waitFrame(t, overlay, func(f []byte) bool { return isInner(f, tc.mac, tc.dst) }) {
			t.Errorf("no frame to %s for %s came out of the far overlay link", tc.mac, tc.dst)
		}
	}
}

// capture opens a packet socket in ns that receives every frame arriving
// on link, whatever its destination MAC.
func capture(t *testing.T, ns *netns.NS, link string) int {
	t.Helper()
	l, err := ns.Netlink(t).LinkByName(link)
	if err != nil {
		t.Fatal(err)
	}
	proto := int(binary.BigEndian.Uint16(binary.NativeEndian.AppendUint16(nil, unix.ETH_P_ALL)))
	fd := -1
	err = ns.Do(func() error {
		s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return err
		}
		fd = s
		return unix.Bind(s, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: l.Attrs().Index})
	})
	if fd >= 0 {
		t.Cleanup(func() { unix.Close(fd) })
	}
	if err != nil {
		t.Fatalf("capture on %s: %v", link, err)
	}
	tv := unix.Timeval{Usec: 200_000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd
}

// waitFrame reads frames from fd for up to three seconds until one matches.
func waitFrame(t *testing.T, fd int, match func([]byte) bool) bool {
	t.Helper()
	buf := make([]byte, 65536)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("read frame: %v", err)
		}
		if match(buf[:n]) {
			return true
		}
	}
	return false
}

// vxlan parses an Ethernet frame carrying a VXLAN datagram over IPv4 or
// IPv6 (no IPv6 extension headers) to port 4790.
func vxlan(f []byte) (dst netip.Addr, vni uint32, inner []byte, ok bool) {
	if len(f) < 14 {
		return netip.Addr{}, 0, nil, false
	}
	ip := f[14:]
	var udp []byte
	switch binary.BigEndian.Uint16(f[12:14]) {
	case unix.ETH_P_IP:
		if len(ip) < 20 || ip[9] != unix.IPPROTO_UDP {
			return netip.Addr{}, 0, nil, false
		}
		dst = netip.AddrFrom4([4]byte(ip[16:20]))
		udp = ip[int(ip[0]&0xf)*4:]
	case unix.ETH_P_IPV6:
		if len(ip) < 40 || ip[6] != unix.IPPROTO_UDP {
			return netip.Addr{}, 0, nil, false
		}
		dst = netip.AddrFrom16([16]byte(ip[24:40]))
		udp = ip[40:]
	default:
		return netip.Addr{}, 0, nil, false
	}
	if len(udp) < 16 || binary.BigEndian.Uint16(udp[2:4]) != 4790 {
		return netip.Addr{}, 0, nil, false
	}
	return dst, binary.BigEndian.Uint32(udp[12:16]) >> 8, udp[16:], true
}

// isInner reports whether f is an Ethernet frame to mac carrying IPv6 or
// IPv4 to dst.
func isInner(f []byte, mac net.HardwareAddr, dst netip.Addr) bool {
	if len(f) < 14 || !bytes.Equal(f[:6], mac) {
		return false
	}
	switch binary.BigEndian.Uint16(f[12:14]) {
	case unix.ETH_P_IPV6:
		return len(f) >= 54 && netip.AddrFrom16([16]byte(f[38:54])) == dst
	case unix.ETH_P_IP:
		return len(f) >= 34 && netip.AddrFrom4([4]byte(f[30:34])) == dst
	}
	return false
}

// TestEnableIPv6Forwarding turns IPv6 forwarding on in a fresh namespace,
// whose default is off, and finds nothing to do the second time.
func TestEnableIPv6Forwarding(t *testing.T) {
	ns := netns.New(t, "fwd6")
	var first, second bool
	var after string
	err := ns.Do(func() error {
		var err error
		if first, err = EnableIPv6Forwarding(); err != nil {
			return err
		}
		if second, err = EnableIPv6Forwarding(); err != nil {
			return err
		}
		after, err = netns.ReadSysctl("net/ipv6/conf/all/forwarding")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !first || second || strings.TrimSpace(after) != "1" {
		t.Errorf("wrote %t then %t, all.forwarding %q; want a write, none, and 1", first, second, after)
	}
}
