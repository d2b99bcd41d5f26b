package plan

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/peerlink/peerlink/internal/cidr"
)

// Ruleset is one nftables table of family ip or ip6, owned entirely by
// peerlink: its sets and prefix maps and its chains of rules, each rule a few matches
// and one statement drawn from the small vocabulary peerlink needs (prefix
// NAT through a map, identity SNAT, SNAT to an address, TCP MSS clamping, a
// counted verdict). Every lookup goes through a set or an interval map, so
// the number of rules on the packet path does not depend on the number of
// peers or ranges.
type Ruleset struct {
	// Table is the table's name.
	Table string
	// Family is the table's family, which every address and prefix of the
	// ruleset is of; the zero value means IPv4.
	Family Family
	// Sets are named interval sets of prefixes.
	Sets []Set
	// Maps are named interval maps from a prefix to a prefix of the same
	// length, for NAT that keeps host bits.
	Maps []Map
	// Chains are the base chains of the table.
	Chains []Chain
	// Counters are named counters that rules count packets in.
	Counters []string
}

// Set is an interval set of prefixes of the ruleset's family.
type Set struct {
	Name     string
	Prefixes []netip.Prefix
}

// Map is an interval map from prefixes to prefixes, both of the ruleset's
// family.
type Map struct {
	Name     string
	Elements []MapElement
}

// MapElement maps the addresses of From onto To, host bits kept.
type MapElement struct {
	From, To netip.Prefix
}

// conntrackPriority is where netfilter's connection tracking runs on
// prerouting; a notrack rule must come before it.
const conntrackPriority = -200

// ChainType is the nftables type of a base chain.
type ChainType string

// Chain types.
const (
	Filter ChainType = "filter"
	NAT    ChainType = "nat"
)

// Hook is the netfilter hook of a base chain.
type Hook string

// Hooks.
const (
	Prerouting  Hook = "prerouting"
	Forward     Hook = "forward"
	Postrouting Hook = "postrouting"
)

// Chain is a base chain with policy accept.
type Chain struct {
	Name     string
	Type     ChainType
	Hook     Hook
	Priority int
	Rules    []Rule
}

// Verdict ends a packet's way through the table.
type Verdict string

// Verdicts.
const (
	Accept Verdict = "accept"
	Drop   Verdict = "drop"
)

// Rule is a rule of a Ruleset's chain: it matches packets on every field set
// and then applies its one statement.
type Rule struct {
	// Comment says what the rule is for; it is stored with the rule.
	Comment string

	// IIF matches packets that arrived on this link.
	IIF string
	// NotIIF matches packets that did not arrive on this link.
	NotIIF string
	// OIF matches packets leaving on this link.
	OIF string
	// SrcIn and SrcNotIn match the source address against a set.
	SrcIn, SrcNotIn string
	// DstIn and DstNotIn match the destination address against a set.
	DstIn, DstNotIn string
	// Src and Dst match one source or destination address.
	Src, Dst netip.Addr
	// DstLocal matches packets addressed to this network namespace itself
	// (the routing lookup of the destination gives a local address).
	DstLocal bool
	// UDPDstPort matches UDP datagrams to this port, TCPDstPort TCP
	// segments.
	UDPDstPort uint16
	TCPDstPort uint16
	// Established matches packets of connections already established
	// (conntrack state), such as the answers to a connection this side
	// opened.
	Established bool
	// TCPSYN matches TCP segments with the SYN flag.
	TCPSYN bool

	// DNATMap translates the destination through a prefix map, host bits
	// kept; packets whose destination is not in the map are left alone.
	DNATMap string
	// SNATMap translates the source through a prefix map, host bits kept.
	SNATMap string
	// SNATKeepSource sets up a source NAT binding to the packet's own
	// source: nothing changes on the wire, but NAT chains that come later
	// (a CNI's masquerade) are no longer consulted for the connection.
	SNATKeepSource bool
	// SNATTo translates the source to this address.
	SNATTo netip.Addr
	// ClampMSS lowers the TCP MSS option to this value when it is larger.
	ClampMSS uint16
	// Notrack exempts the packet from connection tracking: only in a
	// filter chain on prerouting that runs before conntrack (priority
	// below -200).
	Notrack bool
	// Verdict accepts or drops the packet, in a filter chain.
	Verdict Verdict
	// Counter names the counter a packet is counted in before the
	// verdict; only with a Verdict.
	Counter string
}

// EffectiveFamily is the ruleset's family, IPv4 when Family is unset.
func (rs Ruleset) EffectiveFamily() Family {
	if rs.Family == "" {
		return IPv4
	}
	return rs.Family
}

// Empty reports whether the ruleset declares nothing (no chains, sets,
// maps nor counters): it stands for no table at all, which the kernel
// applier removes rather than writing an empty one.
func (rs Ruleset) Empty() bool {
	return len(rs.Chains) == 0 && len(rs.Sets) == 0 && len(rs.Maps) == 0 && len(rs.Counters) == 0
}

// Validate reports a ruleset that cannot be written: a family other than
// ip and ip6, an address or prefix of another family than the ruleset's, a
// rule without exactly one statement, a reference to a set or map the
// ruleset lacks, or a map element whose prefixes differ in length.
func (rs Ruleset) Validate() error {
	fam := rs.EffectiveFamily()
	if fam != IPv4 && fam != IPv6 {
		return fmt.Errorf("table %s: family %q: want %q or %q", rs.Table, rs.Family, IPv4, IPv6)
	}
	sets := map[string]bool{}
	for _, s := range rs.Sets {
		sets[s.Name] = true
		for _, p := range s.Prefixes {
			if err := fam.checkPrefix(p); err != nil {
				return fmt.Errorf("table %s %s: set %s: %w", fam, rs.Table, s.Name, err)
			}
		}
		if i, j, ok := cidr.FirstOverlap(s.Prefixes); ok {
			return fmt.Errorf("table %s: set %s: %s and %s overlap", rs.Table, s.Name, s.Prefixes[i], s.Prefixes[j])
		}
	}
	maps := map[string]bool{}
	for _, m := range rs.Maps {
		maps[m.Name] = true
		for _, e := range m.Elements {
			for _, p := range []netip.Prefix{e.From, e.To} {
				if err := fam.checkPrefix(p); err != nil {
					return fmt.Errorf("table %s %s: map %s: element %s : %s: %w", fam, rs.Table, m.Name, e.From, e.To, err)
				}
			}
			if e.From.Bits() != e.To.Bits() {
				return fmt.Errorf("table %s: map %s: element %s : %s must map prefixes of the same length", rs.Table, m.Name, e.From, e.To)
			}
		}
		keys := make([]netip.Prefix, len(m.Elements))
		for i, e := range m.Elements {
			keys[i] = e.From
		}
		if i, j, ok := cidr.FirstOverlap(keys); ok {
			return fmt.Errorf("table %s: map %s: keys %s and %s overlap", rs.Table, m.Name, keys[i], keys[j])
		}
	}
	for _, c := range rs.Chains {
		for i, r := range c.Rules {
			where := fmt.Sprintf("table %s: chain %s: rule %d", rs.Table, c.Name, i)
			n := 0
			for _, set := range []bool{r.DNATMap != "", r.SNATMap != "", r.SNATKeepSource, r.SNATTo.IsValid(), r.ClampMSS != 0, r.Verdict != "", r.Notrack} {
				if set {
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("%s: has %d statements, want exactly one", where, n)
			}
			for _, name := range []string{r.SrcIn, r.SrcNotIn, r.DstIn, r.DstNotIn} {
				if name != "" && !sets[name] {
					return fmt.Errorf("%s: set %s is not in the ruleset", where, name)
				}
			}
			for _, name := range []string{r.DNATMap, r.SNATMap} {
				if name != "" && !maps[name] {
					return fmt.Errorf("%s: map %s is not in the ruleset", where, name)
				}
			}
			if (r.DNATMap != "" || r.SNATMap != "" || r.SNATKeepSource || r.SNATTo.IsValid()) && c.Type != NAT {
				return fmt.Errorf("%s: NAT statement in a %s chain", where, c.Type)
			}
			if r.Notrack && (c.Type != Filter || c.Hook != Prerouting || c.Priority >= conntrackPriority) {
				return fmt.Errorf("%s: notrack outside a filter chain on prerouting before conntrack (priority below %d)", where, conntrackPriority)
			}
			if r.Verdict != "" && (c.Type != Filter || (r.Verdict != Accept && r.Verdict != Drop)) {
				return fmt.Errorf("%s: verdict %q in a %s chain: want accept or drop in a filter chain", where, r.Verdict, c.Type)
			}
			if r.Counter != "" && (r.Verdict == "" || !slices.Contains(rs.Counters, r.Counter)) {
				return fmt.Errorf("%s: counter %s needs a verdict and a counter of the ruleset", where, r.Counter)
			}
			for _, a := range []struct {
				field string
				addr  netip.Addr
			}{{"source", r.Src}, {"destination", r.Dst}, {"snat to", r.SNATTo}} {
				if !a.addr.IsValid() {
					continue
				}
				if err := fam.checkAddr(a.addr); err != nil {
					return fmt.Errorf("table %s %s: chain %s: rule %d: %s address: %w", fam, rs.Table, c.Name, i, a.field, err)
				}
			}
		}
	}
	return nil
}

// String renders the ruleset in nft syntax.
func (rs Ruleset) String() string {
	var b strings.Builder
	fam := rs.EffectiveFamily()
	fmt.Fprintf(&b, "table %s %s {\n", fam, rs.Table)
	for _, c := range rs.Counters {
		fmt.Fprintf(&b, "\tcounter %s {\n\t}\n", c)
	}
	for _, s := range rs.Sets {
		fmt.Fprintf(&b, "\tset %s {\n\t\ttype %s\n\t\tflags interval\n", s.Name, fam.addrType())
		var elems []string
		for _, p := range s.Prefixes {
			elems = append(elems, p.String())
		}
		writeElements(&b, elems)
		b.WriteString("\t}\n")
	}
	for _, m := range rs.Maps {
		fmt.Fprintf(&b, "\tmap %s {\n\t\ttype %s : interval %[2]s\n\t\tflags interval\n", m.Name, fam.addrType())
		var elems []string
		for _, e := range m.Elements {
			elems = append(elems, e.From.String()+" : "+e.To.String())
		}
		writeElements(&b, elems)
		b.WriteString("\t}\n")
	}
	for _, c := range rs.Chains {
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype %s hook %s priority %d; policy accept;\n", c.Name, c.Type, c.Hook, c.Priority)
		for _, r := range c.Rules {
			if r.Comment != "" {
				fmt.Fprintf(&b, "\t\t%s comment %q\n", r.Syntax(fam), r.Comment)
			} else {
				fmt.Fprintf(&b, "\t\t%s\n", r.Syntax(fam))
			}
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func writeElements(b *strings.Builder, elems []string) {
	if len(elems) == 0 {
		return
	}
	fmt.Fprintf(b, "\t\telements = { %s }\n", strings.Join(elems, ",\n\t\t\t     "))
}

// String renders the rule in nft syntax for a table of family ip, without
// its comment.
func (r Rule) String() string { return r.Syntax(IPv4) }

// Syntax renders the rule in nft syntax for a table of family f, without
// its comment.
func (r Rule) Syntax(f Family) string {
	// nft names the IPv4 header "ip" and the IPv6 header "ip6", as it
	// names the families.
	h := string(f)
	if f == "" {
		h = string(IPv4)
	}
	var parts []string
	if r.IIF != "" {
		parts = append(parts, fmt.Sprintf("iifname %q", r.IIF))
	}
	if r.NotIIF != "" {
		parts = append(parts, fmt.Sprintf("iifname != %q", r.NotIIF))
	}
	if r.OIF != "" {
		parts = append(parts, fmt.Sprintf("oifname %q", r.OIF))
	}
	if r.SrcIn != "" {
		parts = append(parts, h+" saddr @"+r.SrcIn)
	}
	if r.SrcNotIn != "" {
		parts = append(parts, h+" saddr != @"+r.SrcNotIn)
	}
	if r.DstIn != "" {
		parts = append(parts, h+" daddr @"+r.DstIn)
	}
	if r.DstNotIn != "" {
		parts = append(parts, h+" daddr != @"+r.DstNotIn)
	}
	if r.Src.IsValid() {
		parts = append(parts, h+" saddr "+r.Src.String())
	}
	if r.Dst.IsValid() {
		parts = append(parts, h+" daddr "+r.Dst.String())
	}
	if r.DstLocal {
		parts = append(parts, "fib daddr type local")
	}
	if r.UDPDstPort != 0 {
		parts = append(parts, fmt.Sprintf("udp dport %d", r.UDPDstPort))
	}
	if r.TCPDstPort != 0 {
		parts = append(parts, fmt.Sprintf("tcp dport %d", r.TCPDstPort))
	}
	if r.Established {
		parts = append(parts, "ct state established")
	}
	if r.TCPSYN {
		parts = append(parts, "tcp flags syn")
	}
	switch {
	case r.DNATMap != "":
		parts = append(parts, fmt.Sprintf("dnat %s prefix to %[1]s daddr map @%s", h, r.DNATMap))
	case r.SNATMap != "":
		parts = append(parts, fmt.Sprintf("snat %s prefix to %[1]s saddr map @%s", h, r.SNATMap))
	case r.SNATKeepSource:
		parts = append(parts, "snat to "+h+" saddr")
	case r.SNATTo.IsValid():
		parts = append(parts, "snat to "+r.SNATTo.String())
	case r.ClampMSS != 0:
		parts = append(parts, fmt.Sprintf("tcp option maxseg size > %d tcp option maxseg size set %d", r.ClampMSS, r.ClampMSS))
	case r.Verdict != "":
		if r.Counter != "" {
			parts = append(parts, fmt.Sprintf("counter name %q", r.Counter))
		}
		parts = append(parts, string(r.Verdict))
	case r.Notrack:
		parts = append(parts, "notrack")
	}
	return strings.Join(parts, " ")
}
