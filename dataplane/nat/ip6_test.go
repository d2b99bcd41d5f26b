package nat

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// nat6Ruleset is natRuleset's IPv6 twin, with an ingress filter of every
// match besides: a rule of every NAT statement, an MSS clamp, addresses,
// ports, fib, conntrack state and counters, all in family ip6. It has the
// same table name as natRuleset, as a plan's NAT6 has NAT's.
func nat6Ruleset() plan.Ruleset {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	return plan.Ruleset{
		Table:  "peerlink-test",
		Family: plan.IPv6,
		Sets: []plan.Set{
			{Name: "pods", Prefixes: []netip.Prefix{p("fd44:1::/48")}},
			{Name: "remote", Prefixes: []netip.Prefix{p("fd00:72::/48"), p("fd00:71::/48")}},
		},
		Maps: []plan.Map{
			{Name: "to_real", Elements: []plan.MapElement{
				{From: p("fd00:71::/48"), To: p("fd44:2::/48")},
				{From: p("fd00:72::/64"), To: p("fd00:70::/64")},
			}},
			{Name: "to_remapped", Elements: []plan.MapElement{{From: p("fd44:2::/48"), To: p("fd00:71::/48")}}},
		},
		Counters: []string{"source", "self"},
		Chains: []plan.Chain{
			{Name: "ingress", Type: plan.Filter, Hook: plan.Prerouting, Priority: -150, Rules: []plan.Rule{
				{Comment: "probe", IIF: "peerlink-tunnel", Src: a("fd00:70::2"), Dst: a("fd00:70::1"), UDPDstPort: 9999, Verdict: plan.Accept},
				{IIF: "peerlink-tunnel", TCPDstPort: 12346, Established: true, Verdict: plan.Accept},
				{IIF: "peerlink-tunnel", SrcNotIn: "remote", Counter: "source", Verdict: plan.Drop},
				{IIF: "peerlink-tunnel", DstLocal: true, Counter: "self", Verdict: plan.Drop},
			}},
			{Name: "pre", Type: plan.NAT, Hook: plan.Prerouting, Priority: -100, Rules: []plan.Rule{
				{Comment: "remapped to real", NotIIF: "peerlink-tunnel", DNATMap: "to_real"},
			}},
			{Name: "post", Type: plan.NAT, Hook: plan.Postrouting, Priority: 99, Rules: []plan.Rule{
				{IIF: "peerlink-tunnel", SNATMap: "to_remapped"},
				{DstIn: "remote", SrcNotIn: "pods", SNATTo: a("fd00:70::1")},
				{DstIn: "remote", SNATKeepSource: true},
			}},
			{Name: "mss", Type: plan.Filter, Hook: plan.Forward, Priority: -150, Rules: []plan.Rule{
				{OIF: "peerlink-tunnel", TCPSYN: true, ClampMSS: 1220},
			}},
		},
	}
}

// TestCompileIP6 checks the expressions nft itself writes for the IPv6
// forms (`nft --debug=netlink`): 16-byte addresses at offsets 8 and 24, NAT
// in NFPROTO_IPV6, and prefix NAT taking the range's end from register 2,
// where a lookup into register 1 of a map of 32-byte values puts it.
func TestCompileIP6(t *testing.T) {
	rs := nat6Ruleset()
	sets := map[string]*nftables.Set{}
	for i, name := range []string{"pods", "remote", "to_real", "to_remapped"} {
		sets[name] = &nftables.Set{Name: name, ID: uint32(i + 1)}
	}
	rule := func(r plan.Rule) []expr.Any {
		t.Helper()
		ex, err := compileRule(r, ipv6, sets)
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
	dnat := rule(rs.Chains[1].Rules[0])
	load, nat := dnat[len(dnat)-3].(*expr.Payload), dnat[len(dnat)-1].(*expr.NAT)
	if load.Offset != 24 || load.Len != 16 {
		t.Errorf("prefix DNAT loads %d bytes at %d, want the destination: 16 at 24", load.Len, load.Offset)
	}
	if nat.Family != unix.NFPROTO_IPV6 || nat.RegAddrMin != unix.NFT_REG_1 || nat.RegAddrMax != unix.NFT_REG_2 || !nat.Prefix {
		t.Errorf("prefix DNAT = %+v, want ip6 from register 1 to register 2, prefix", nat)
	}
	snat := rule(rs.Chains[2].Rules[0])
	if load := snat[len(snat)-3].(*expr.Payload); load.Offset != 8 || load.Len != 16 {
		t.Errorf("prefix SNAT loads %d bytes at %d, want the source: 16 at 8", load.Len, load.Offset)
	}
	probe := rule(rs.Chains[0].Rules[0])
	var l4 bool
	for _, e := range probe {
		switch e := e.(type) {
		case *expr.Payload:
			if e.Base == expr.PayloadBaseNetworkHeader && (e.Len != 16 || (e.Offset != 8 && e.Offset != 24)) {
				t.Errorf("address match loads %d bytes at %d of the IPv6 header", e.Len, e.Offset)
			}
		case *expr.Meta:
			l4 = l4 || e.Key == expr.MetaKeyL4PROTO
		}
	}
	if !l4 {
		t.Errorf("the UDP port match does not check the transport protocol with meta l4proto: %v", probe)
	}
}

// TestApplyIP6 writes an ip6 table into a real namespace: nft prints it
// back (the maps of ranges and the prefix NAT rules that use them), a
// second Apply writes nothing, a rule replaced by hand is found and
// written back, counters are read in family ip6, and the table of the same
// name in family ip is a different table, which Remove of one family
// leaves alone.
func TestApplyIP6(t *testing.T) {
	ns, a := applierInNewNetns(t, "nat6")
	rs := nat6Ruleset()
	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("first Apply = %v, %v; want a write", changed, err)
	}
	listing := ns.MustRun(t, "nft", "list", "table", "ip6", rs.Table)
	for _, want := range []string{
		"table ip6 peerlink-test {",
		"map to_real {\n\t\ttype ipv6_addr : interval ipv6_addr\n\t\tflags interval\n",
		"elements = { fd00:71::/48 : fd44:2::/48,\n\t\t\t     fd00:72::/64 : fd00:70::/64 }",
		`iifname != "peerlink-tunnel" dnat ip6 prefix to ip6 daddr map @to_real comment "remapped to real [`,
		`iifname "peerlink-tunnel" snat ip6 prefix to ip6 saddr map @to_remapped`,
		"ip6 saddr != @pods ip6 daddr @remote snat to fd00:70::1",
		"ip6 daddr @remote snat to ip6 saddr",
		`iifname "peerlink-tunnel" ip6 saddr fd00:70::2 ip6 daddr fd00:70::1 udp dport 9999 accept`,
		`iifname "peerlink-tunnel" ct state established tcp dport 12346 accept`,
		`iifname "peerlink-tunnel" fib daddr type local counter name "self" drop`,
		"tcp flags syn tcp option maxseg size > 1220 tcp option maxseg size set 1220",
	} {
		if !strings.Contains(listing, want) {
			t.Errorf("nft listing lacks %q:\n%s", want, listing)
		}
	}
	if changed, err := a.Apply(rs); err != nil || changed {
		t.Fatalf("second Apply = %v, %v; want no write", changed, err)
	}

	// A hand-made rule in place of peerlink's prefix SNAT.
	handle := ""
	for _, line := range strings.Split(ns.MustRun(t, "nft", "-a", "list", "chain", "ip6", rs.Table, "post"), "\n") {
		if _, h, ok := strings.Cut(line, "map @to_remapped"); ok {
			_, handle, _ = strings.Cut(h, "# handle ")
		}
	}
	if handle == "" {
		t.Fatal("no handle of the prefix SNAT rule")
	}
	ns.MustRun(t, "nft", "replace", "rule", "ip6", rs.Table, "post", "handle", strings.TrimSpace(handle),
		"iifname", "peerlink-tunnel", "snat", "ip6", "to", "fd00:70::9")
	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("Apply after a rule was replaced by hand = %v, %v; want a write", changed, err)
	}
	if again := ns.MustRun(t, "nft", "list", "table", "ip6", rs.Table); again != listing {
		t.Errorf("Apply did not restore the table:\n%s\nthen:\n%s", listing, again)
	}

	ns.MustRun(t, "nft", "delete", "element", "ip6", rs.Table, "to_real", "{ fd00:72::/64 }")
	if changed, err := a.Apply(rs); err != nil || !changed {
		t.Fatalf("Apply after a map element was deleted = %v, %v; want a write", changed, err)
	}

	counters, err := a.Counters(rs.Table, plan.IPv6)
	if err != nil || len(counters) != 2 {
		t.Errorf("Counters of table ip6 %s = %v, %v; want source and self", rs.Table, counters, err)
	}

	// The ip table of the same name is another table: writing it leaves
	// the ip6 one as it is, and each Remove takes its own family's only.
	if changed, err := a.Apply(natRuleset()); err != nil || !changed {
		t.Fatalf("Apply of the ip table = %v, %v; want a write", changed, err)
	}
	if changed, err := a.Apply(rs); err != nil || changed {
		t.Fatalf("Apply of the ip6 table after the ip one = %v, %v; want no write", changed, err)
	}
	if err := a.Remove(rs.Table, plan.IPv6); err != nil {
		t.Fatal(err)
	}
	if tables := ns.MustRun(t, "nft", "list", "tables"); tables != "table ip peerlink-test\n" {
		t.Errorf("after Remove of the ip6 table, tables are:\n%s", tables)
	}
	if err := a.Remove(rs.Table, plan.IPv6); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	if err := a.Remove(rs.Table, plan.IPv4); err != nil {
		t.Fatal(err)
	}
	if tables := ns.MustRun(t, "nft", "list", "tables"); tables != "" {
		t.Errorf("after Remove of both tables, tables are:\n%s", tables)
	}
}

// TestApplyRefusesMixedFamilies checks that a ruleset with an address of
// the other family is refused, naming the value, before anything is
// written.
func TestApplyRefusesMixedFamilies(t *testing.T) {
	ns, a := applierInNewNetns(t, "nat6mix")
	rs := nat6Ruleset()
	rs.Maps[0].Elements[1].To = netip.MustParsePrefix("10.70.0.0/24")
	const want = "table ip6 peerlink-test: map to_real: element fd00:72::/64 : 10.70.0.0/24: 10.70.0.0/24 is not IPv6"
	if changed, err := a.Apply(rs); err == nil || changed || !strings.Contains(err.Error(), want) {
		t.Errorf("Apply of an ip6 ruleset with an IPv4 prefix = %v, %v; want an error containing %q", changed, err, want)
	}
	if tables := ns.MustRun(t, "nft", "list", "tables"); tables != "" {
		t.Errorf("a refused Apply left tables:\n%s", tables)
	}
}

// TestPrefixNAT6InKernel sends a datagram between two namespaces through
// both prefix maps: the sender's source fd44:1:0:5::7 is mapped from
// fd44:1::/48 onto fd00:71::/48 on the way out, and its destination
// fd00:72::2 from fd00:72::/64 onto fd09::/64 on the way in. The receiver
// sees the remapped source with the host bits kept, fd00:71:0:5::7.
func TestPrefixNAT6InKernel(t *testing.T) {
	src, dst := netns.Joined(t,
		netns.End{Prefix: "n6src", Link: "out"},
		netns.End{Prefix: "n6dst", Link: "in"})
	// nodad: an address is usable at once, not after duplicate address
	// detection.
	src.MustRun(t, "ip", "addr", "add", "fd09::1/64", "dev", "out", "nodad")
	src.MustRun(t, "ip", "addr", "add", "fd44:1:0:5::7/128", "dev", "lo", "nodad")
	src.MustRun(t, "ip", "route", "add", "fd00:72::/64", "via", "fd09::2")
	dst.MustRun(t, "ip", "addr", "add", "fd09::2/64", "dev", "in", "nodad")
	// Neighbor discovery on a link just up may take seconds before it
	// answers; the test is not about it.
	in, err := dst.Netlink(t).LinkByName("in")
	if err != nil {
		t.Fatal(err)
	}
	src.MustRun(t, "ip", "neigh", "add", "fd09::2", "lladdr", in.Attrs().HardwareAddr.String(), "dev", "out", "nud", "permanent")
	p := netip.MustParsePrefix
	applyOnce(t, src, plan.Ruleset{
		Table: "peerlink-nat6-src", Family: plan.IPv6,
		Maps: []plan.Map{{Name: "to_remapped", Elements: []plan.MapElement{{From: p("fd44:1::/48"), To: p("fd00:71::/48")}}}},
		Chains: []plan.Chain{{Name: "post", Type: plan.NAT, Hook: plan.Postrouting, Priority: 100, Rules: []plan.Rule{
			{OIF: "out", SNATMap: "to_remapped"},
		}}},
	})
	applyOnce(t, dst, plan.Ruleset{
		Table: "peerlink-nat6-dst", Family: plan.IPv6,
		Maps: []plan.Map{{Name: "to_real", Elements: []plan.MapElement{{From: p("fd00:72::/64"), To: p("fd09::/64")}}}},
		Chains: []plan.Chain{{Name: "pre", Type: plan.NAT, Hook: plan.Prerouting, Priority: -100, Rules: []plan.Rule{
			{IIF: "in", DNATMap: "to_real"},
		}}},
	})
	from, err := sendUDPFrom(t, src, dst, "[fd44:1:0:5::7]:0", "[fd00:72::2]:7777", "[fd09::2]:7777")
	if err != nil {
		t.Fatalf("the datagram to the remapped address did not arrive at the real one: %v", err)
	}
	if got := from.(*net.UDPAddr).IP.String(); got != "fd00:71:0:5::7" {
		t.Errorf("the datagram came from %s, want fd00:71:0:5::7 (fd44:1:0:5::7 remapped, host bits kept)", got)
	}
}
