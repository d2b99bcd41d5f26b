package rangepolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/peerlink/peerlink/internal/cidr"
)

// Rule names the rule a refused range broke, as used in condition messages
// and errors.
type Rule string

// The rules of a Policy.
const (
	// RuleFamily: the value is no network of a family peerlink routes
	// (the zero prefix, say).
	RuleFamily Rule = "UnsupportedFamily"
	// RuleSpecialUse: the range is, holds or lies in a special-use range.
	RuleSpecialUse Rule = "SpecialUse"
	// RuleNotAllowed: the range lies outside the allowlist.
	RuleNotAllowed Rule = "NotAllowed"
)

// Refusal reports a range a Policy refuses and why.
type Refusal struct {
	// Range is the refused range.
	Range netip.Prefix
	// Rule is the rule it broke.
	Rule Rule
	// Detail says how, for a person.
	Detail string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%s refused (%s): %s", r.Range, r.Rule, r.Detail)
}

// specialUse are the ranges of the IANA special-purpose registries (RFC
// 6890 and its updates) that are never a peer's pods: routing one of them
// to a peer would hand it this cluster's loopback, its metadata service
// (169.254.169.254), the tunnel addresses, multicast, or addresses that
// stand for other hosts (IPv4-mapped, NAT64, documentation).
var specialUse = []struct {
	prefix netip.Prefix
	name   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (and broadcast)"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	// IPv4 hosts in IPv6 form: a peer's range here would stand for the
	// IPv4 addresses they map, outside the IPv4 rules.
	{netip.MustParsePrefix("::ffff:0:0/96"), "IPv4-mapped"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64 (well-known prefix)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64 (local-use)"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (deprecated)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// DefaultAllowed returns the allowlist used when the installer sets none: the
// private ranges of RFC 1918, the shared address space of RFC 6598 and the
// IPv6 unique local addresses of RFC 4193. Global unicast IPv6 ranges, like
// public IPv4 ones, take an entry of the installer's allowlist.
func DefaultAllowed() []netip.Prefix {
	return cidr.MustPrefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
}

// ServiceAddresses returns the well-known addresses of cloud services that
// no peer range may ever land on, kept as it is or remapped: a node reaches
// them through its default route, and a route to a peer over one of them
// would hand the peer this cluster's resolver or metadata service. They
// are taken ranges of the IPAM (package ipam) and keep a range that holds
// one from being routed as it is (Policy.RoutedIn). Link-local addresses
// (the metadata service at 169.254.169.254, GCP's resolver) are refused as
// special-use already.
func ServiceAddresses() []netip.Prefix {
	return cidr.MustPrefixes(
		// Alibaba Cloud: the metadata service (100.100.100.200) and the
		// resolvers (100.100.2.136, 100.100.2.138) of every VPC.
		"100.100.0.0/16",
		// AWS: the resolver of a default VPC (172.31.0.0/16) answers at
		// its base plus two, 172.31.0.2; the /30 holds the base addresses
		// AWS reserves.
		"172.31.0.0/30",
		// Azure: the platform's virtual public address, which serves DNS,
		// DHCP, the health probes and the guest agent of every VM.
		"168.63.129.16/32",
	)
}

// Policy decides which peer ranges are acceptable and which of them may be
// routed as they are. The zero value uses DefaultAllowed and routes none.
type Policy struct {
	// Allowed is the allowlist: an accepted range lies inside one of them.
	// Empty means DefaultAllowed.
	Allowed []netip.Prefix
	// Routed is the address plan this cluster's admin declared for peers
	// (--routed-peer-cidr): a peer's range inside it is routed as it is
	// when it collides with nothing local. Anywhere else a peer's range is
	// remapped into this cluster's pools. Empty: every range is remapped.
	Routed []netip.Prefix
}

// RoutedIn returns the entry of the plan r lies in, and whether r may be
// routed as it is: inside the plan and clear of ServiceAddresses. It does
// not know the ranges the cluster uses; the IPAM remaps a range that
// collides with one whatever this says.
func (p Policy) RoutedIn(r netip.Prefix) (netip.Prefix, bool) {
	for _, s := range ServiceAddresses() {
		if s.Overlaps(r) {
			return netip.Prefix{}, false
		}
	}
	for _, a := range p.Routed {
		if a.Bits() <= r.Bits() && a.Contains(r.Addr()) {
			return a, true
		}
	}
	return netip.Prefix{}, false
}

// Placement says for a person where r goes when accepted: "routed as it is
// (in plan <entry>)" or "remapped".
func (p Policy) Placement(r netip.Prefix) string {
	if a, ok := p.RoutedIn(r); ok {
		return fmt.Sprintf("routed as it is (in plan %s)", a)
	}
	return "remapped"
}

// AllowedRanges returns the allowlist in force.
func (p Policy) AllowedRanges() []netip.Prefix {
	if len(p.Allowed) == 0 {
		return DefaultAllowed()
	}
	return p.Allowed
}

// Check returns nil when r may be routed to a peer, and a *Refusal naming the
// rule otherwise. r must be a network (no host bits); callers parse it with
// cidr.ParseNetwork first.
func (p Policy) Check(r netip.Prefix) error {
	if err := CheckRoutable(r); err != nil {
		return err
	}
	for _, a := range p.AllowedRanges() {
		if a.Bits() <= r.Bits() && a.Contains(r.Addr()) {
			return nil
		}
	}
	return &Refusal{Range: r, Rule: RuleNotAllowed,
		Detail: fmt.Sprintf("outside the allowed peer ranges %s", Format(p.AllowedRanges()))}
}

// CheckRoutable applies the rules no allowlist lifts: r is a network of
// either family that holds no special-use range, nor lies in one. It is
// what tools that do not know the installer's allowlist can check.
func CheckRoutable(r netip.Prefix) error {
	if !r.IsValid() {
		return &Refusal{Range: r, Rule: RuleFamily, Detail: "not an IPv4 or IPv6 network"}
	}
	if s, ok := specialOverlap(r); ok {
		return &Refusal{Range: r, Rule: RuleSpecialUse, Detail: s}
	}
	return nil
}

// specialOverlap describes the special-use range r overlaps, if any.
func specialOverlap(r netip.Prefix) (string, bool) {
	for _, s := range specialUse {
		if !s.prefix.Overlaps(r) {
			continue
		}
		switch {
		case r.Bits() == 0:
			return fmt.Sprintf("a default route holds %s (%s)", s.prefix, s.name), true
		case r.Bits() < s.prefix.Bits():
			return fmt.Sprintf("holds %s (%s)", s.prefix, s.name), true
		default:
			return fmt.Sprintf("is in %s (%s)", s.prefix, s.name), true
		}
	}
	return "", false
}

// Validate checks an allowlist an installer gives: networks of either
// family, none of them special-use nor holding one. The error names each bad entry by its position.
func Validate(allowed []netip.Prefix) error { return validateList("allowed range", allowed) }

// ValidateRouted checks an address plan an installer gives (Policy.Routed)
// by the rules of Validate.
func ValidateRouted(plan []netip.Prefix) error { return validateList("routed range", plan) }

func validateList(what string, ps []netip.Prefix) error {
	var errs []error
	for i, a := range ps {
		switch {
		case !a.IsValid():
			errs = append(errs, fmt.Errorf("%s %d (%s): not an IPv4 or IPv6 network", what, i, a))
		case a != a.Masked():
			errs = append(errs, fmt.Errorf("%s %d (%s): %w (the network is %s)", what, i, a, cidr.ErrHostBits, a.Masked()))
		default:
			if s, ok := specialOverlap(a); ok {
				errs = append(errs, fmt.Errorf("%s %d (%s): %s, a special-use range that is never routed to a peer", what, i, a, s))
			}
		}
	}
	return errors.Join(errs...)
}

// ParseList parses a comma-separated list of networks, as the allowlist is
// written in flags and in the cluster-info ConfigMap. Blank entries are
// skipped, so "" is the empty list.
func ParseList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := cidr.ParseNetwork(f)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Format writes ps as ParseList reads them.
func Format(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
