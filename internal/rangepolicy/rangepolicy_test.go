package rangepolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	custom := Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	gua := Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("2a01:4f8::/32"), netip.MustParsePrefix("fd00::/8")}}
	for _, tc := range []struct {
		policy Policy
		r      string
		want   Rule // "" = accepted
		detail string
	}{
		{r: "10.244.0.0/16"},
		{r: "10.0.0.0/8"},
		{r: "172.16.0.0/12"},
		{r: "172.31.255.0/24"},
		{r: "192.168.7.0/24"},
		{r: "100.64.0.0/10"},
		{r: "100.127.0.0/16"},
		{r: "169.254.0.0/16", want: RuleSpecialUse, detail: "link-local"},
		{r: "169.254.169.254/32", want: RuleSpecialUse, detail: "is in 169.254.0.0/16 (link-local)"},
		{r: "169.254.18.0/24", want: RuleSpecialUse, detail: "is in 169.254.0.0/16 (link-local)"},
		{r: "127.0.0.0/8", want: RuleSpecialUse, detail: "loopback"},
		{r: "127.0.0.1/32", want: RuleSpecialUse, detail: "is in 127.0.0.0/8 (loopback)"},
		{r: "0.0.0.0/8", want: RuleSpecialUse, detail: "this network"},
		{r: "0.0.0.0/0", want: RuleSpecialUse, detail: "default route"},
		{r: "128.0.0.0/1", want: RuleSpecialUse, detail: "holds 169.254.0.0/16 (link-local)"},
		{r: "224.0.0.0/4", want: RuleSpecialUse, detail: "multicast"},
		{r: "239.1.0.0/16", want: RuleSpecialUse, detail: "is in 224.0.0.0/4 (multicast)"},
		{r: "240.0.0.0/4", want: RuleSpecialUse, detail: "reserved"},
		{r: "255.255.255.255/32", want: RuleSpecialUse, detail: "is in 240.0.0.0/4 (reserved"},
		{r: "8.8.8.0/24", want: RuleNotAllowed, detail: "outside the allowed peer ranges 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"},
		{r: "100.128.0.0/16", want: RuleNotAllowed, detail: "outside the allowed peer ranges"},
		{r: "100.0.0.0/8", want: RuleNotAllowed, detail: "outside the allowed peer ranges"},
		{r: "172.32.0.0/16", want: RuleNotAllowed, detail: "outside the allowed peer ranges"},
		// Holds an allowed range but is wider: not inside the allowlist.
		{r: "10.0.0.0/7", want: RuleNotAllowed, detail: "outside the allowed peer ranges"},
		// IPv6: unique local addresses are allowed by default.
		{r: "fd00::/64"},
		{r: "fd44:1::/48"},
		{r: "fc00::/7"},
		{r: "fc12:3456::/32"},
		// Beside the ULA range: outside the allowlist; wider: it holds
		// link-local and multicast.
		{r: "fb00::/8", want: RuleNotAllowed, detail: "fc00::/7"},
		{r: "fc00::/6", want: RuleSpecialUse, detail: "holds fe80::/10 (link-local)"},
		// Global unicast takes an allowlist entry.
		{r: "2a01:4f8::/32", want: RuleNotAllowed, detail: "outside the allowed peer ranges"},
		{policy: gua, r: "2a01:4f8:1::/48"},
		{policy: gua, r: "2a01:4f8::/32"},
		{policy: gua, r: "2a01:4f9::/48", want: RuleNotAllowed, detail: "outside the allowed peer ranges 2a01:4f8::/32,fd00::/8"},
		{policy: gua, r: "fc00::/8", want: RuleNotAllowed, detail: "2a01:4f8::/32,fd00::/8"},
		{policy: gua, r: "10.244.0.0/16", want: RuleNotAllowed, detail: "2a01:4f8::/32,fd00::/8"},
		// An IPv4 range in IPv6 form is special-use: callers parse with
		// cidr.ParseNetwork, which gives it its IPv4 form.
		{r: "::ffff:10.0.0.0/104", want: RuleSpecialUse, detail: "is in ::ffff:0.0.0.0/96 (IPv4-mapped)"},
		// Straddling: holding a special-use range, or lying in one.
		{r: "::/0", want: RuleSpecialUse, detail: "a default route holds ::/128 (unspecified)"},
		{r: "::/8", want: RuleSpecialUse, detail: "holds ::/128 (unspecified)"},
		{r: "::/127", want: RuleSpecialUse, detail: "holds ::/128 (unspecified)"},
		{r: "::ffff:0.0.0.0/95", want: RuleSpecialUse, detail: "holds ::ffff:0.0.0.0/96 (IPv4-mapped)"},
		{r: "64:ff9b::/32", want: RuleSpecialUse, detail: "holds 64:ff9b::/96 (NAT64 (well-known prefix))"},
		{r: "64:ff9b::a00:0/120", want: RuleSpecialUse, detail: "is in 64:ff9b::/96 (NAT64"},
		{r: "2001::/16", want: RuleSpecialUse, detail: "holds 2001::/23 (IETF protocol assignments)"},
		{r: "2001:db8:1::/48", want: RuleSpecialUse, detail: "is in 2001:db8::/32 (documentation)"},
		{r: "fe80::/64", want: RuleSpecialUse, detail: "is in fe80::/10 (link-local)"},
		{r: "fe00::/7", want: RuleSpecialUse, detail: "holds fe80::/10 (link-local)"},
		{r: "ff02::/16", want: RuleSpecialUse, detail: "is in ff00::/8 (multicast)"},
		{r: "f000::/4", want: RuleSpecialUse, detail: "holds fe80::/10 (link-local)"},
		// Beside them: judged by the allowlist only.
		{policy: gua, r: "2a01:4f8:1:2::/64"},
		{policy: Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("2001:200::/23")}}, r: "2001:200::/32"},
		{policy: custom, r: "10.244.1.0/24"},
		{policy: custom, r: "10.245.0.0/16", want: RuleNotAllowed, detail: "10.244.0.0/16"},
		{policy: custom, r: "10.0.0.0/8", want: RuleNotAllowed, detail: "outside the allowed peer ranges 10.244.0.0/16"},
	} {
		err := tc.policy.Check(netip.MustParsePrefix(tc.r))
		if tc.want == "" {
			if err != nil {
				t.Errorf("Check(%s) = %v, want accepted", tc.r, err)
			}
			continue
		}
		var ref *Refusal
		if !errors.As(err, &ref) {
			t.Errorf("Check(%s) = %v, want a refusal by %s", tc.r, err, tc.want)
			continue
		}
		if ref.Rule != tc.want || !strings.Contains(err.Error(), tc.detail) || !strings.Contains(err.Error(), tc.r) {
			t.Errorf("Check(%s) = %q (rule %s), want rule %s, naming the range and %q", tc.r, err, ref.Rule, tc.want, tc.detail)
		}
	}
}

// TestSpecialUseIPv6 checks that every IPv6 special-use range, and a range
// inside each, is refused naming it and its rule, under an allowlist that
// holds them all (Validate refuses such an allowlist; Check does not trust
// that it was called).
func TestSpecialUseIPv6(t *testing.T) {
	everything := Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("::/0")}}
	for _, tc := range []struct{ r, name, inside string }{
		{"::/128", "unspecified", ""},
		{"::1/128", "loopback", ""},
		{"::ffff:0.0.0.0/96", "IPv4-mapped", "::ffff:10.0.0.0/104"},
		{"64:ff9b::/96", "NAT64 (well-known prefix)", "64:ff9b::/120"},
		{"64:ff9b:1::/48", "NAT64 (local-use)", "64:ff9b:1:2::/64"},
		{"100::/64", "discard-only", "100::/80"},
		{"2001::/23", "IETF protocol assignments", "2001::/32"},
		{"2001:db8::/32", "documentation", "2001:db8:5::/48"},
		{"3fff::/20", "documentation", "3fff:fff::/32"},
		{"fe80::/10", "link-local", "fe80::/64"},
		{"fec0::/10", "site-local (deprecated)", "fec0:1::/32"},
		{"ff00::/8", "multicast", "ff02::/16"},
	} {
		for _, r := range []string{tc.r, tc.inside} {
			if r == "" {
				continue
			}
			for _, pol := range []Policy{{}, everything} {
				err := pol.Check(netip.MustParsePrefix(r))
				var ref *Refusal
				want := tc.r + " (" + tc.name + ")"
				if !errors.As(err, &ref) || ref.Rule != RuleSpecialUse || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), r) {
					t.Errorf("%v.Check(%s) = %v, want a SpecialUse refusal naming %s and %q", pol.Allowed, r, err, r, want)
				}
			}
		}
	}
}

func TestCheckInvalid(t *testing.T) {
	var ref *Refusal
	if err := (Policy{}).Check(netip.Prefix{}); !errors.As(err, &ref) || ref.Rule != RuleFamily {
		t.Fatalf("Check(zero prefix) = %v, want a refusal", err)
	}
}

func TestValidate(t *testing.T) {
	if err := Validate(DefaultAllowed()); err != nil {
		t.Fatalf("Validate(DefaultAllowed()) = %v", err)
	}
	err := Validate([]netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("0.0.0.0/0"),
		netip.MustParsePrefix("10.1.2.3/16"),
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("2000::/3"),
		netip.MustParsePrefix("2a01:4f8::1/32"),
		{},
	})
	for _, want := range []string{"allowed range 1 (0.0.0.0/0)", "allowed range 2 (10.1.2.3/16): host bits set",
		"allowed range 4 (2000::/3): holds 2001::/23 (IETF protocol assignments)", "allowed range 5 (2a01:4f8::1/32): host bits set",
		"allowed range 6 (invalid Prefix): not an IPv4 or IPv6 network"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to say %q", err, want)
		}
	}
	for _, good := range []string{"allowed range 0 ", "allowed range 3 "} {
		if err != nil && strings.Contains(err.Error(), good) {
			t.Errorf("Validate = %v, names the good entry %q", err, good)
		}
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList(" 10.0.0.0/8, ,192.168.0.0/16 ,fd00::/8,2a01:4f8::/32")
	if err != nil || Format(got) != "10.0.0.0/8,192.168.0.0/16,fd00::/8,2a01:4f8::/32" {
		t.Fatalf("ParseList = %v, %v", got, err)
	}
	if got, err := ParseList(""); err != nil || len(got) != 0 {
		t.Fatalf("ParseList(\"\") = %v, %v, want empty", got, err)
	}
	for _, bad := range []string{"10.0.0.0/8,nonsense", "10.0.0.1/8", "10.0.0.0"} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) succeeded, want an error", bad)
		}
	}
}

// FuzzCheck checks that no accepted range overlaps a special-use range or
// lies outside the allowlist, whatever the input.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"10.244.0.0/16", "0.0.0.0/0", "169.254.169.254/32", "8.8.8.0/24", "fd00::/8", "100.64.0.0/10", "::/0", "fe80::/64", "2a01:4f8::/48"} {
		f.Add(s, "")
		f.Add(s, "10.244.0.0/16,8.8.0.0/16,2a01:4f8::/32")
	}
	f.Fuzz(func(t *testing.T, r, allow string) {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return
		}
		p = p.Masked()
		allowed, err := ParseList(allow)
		if err != nil || Validate(allowed) != nil {
			return
		}
		pol := Policy{Allowed: allowed}
		if pol.Check(p) != nil {
			return
		}
		for _, s := range specialUse {
			if s.prefix.Overlaps(p) {
				t.Fatalf("accepted %s: overlaps %s", p, s.prefix)
			}
		}
		inside := false
		for _, a := range pol.AllowedRanges() {
			inside = inside || (a.Bits() <= p.Bits() && a.Contains(p.Addr()))
		}
		if !inside {
			t.Fatalf("accepted %s outside %v", p, pol.AllowedRanges())
		}
	})
}

func TestCheckServerAddr(t *testing.T) {
	for _, ok := range []string{"192.0.2.10", "10.0.0.1", "203.0.113.7", "2001:db8::1", "::ffff:192.0.2.1", "fd30:0:1::2", "2a01:4f8::7"} {
		if err := CheckServerAddr(netip.MustParseAddr(ok)); err != nil {
			t.Errorf("CheckServerAddr(%s) = %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0", "127.0.0.1", "127.255.0.9", "169.254.169.254", "224.0.0.1", "255.255.255.255", "::", "::1", "fe80::1", "fe80::1%eth0", "ff02::1", "ff05::2", "ff01::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0", "::ffff:224.0.0.1", "::ffff:255.255.255.255", "fd30:0:1::2%eth0"} {
		if err := CheckServerAddr(netip.MustParseAddr(bad)); err == nil {
			t.Errorf("CheckServerAddr(%s) accepted it", bad)
		}
	}
	if err := CheckServerAddr(netip.Addr{}); err == nil {
		t.Error("CheckServerAddr of no address accepted it")
	}
}

// TestRoutedIn: a range is routed as it is only inside the plan and clear
// of every cloud service address; with no plan, never.
func TestRoutedIn(t *testing.T) {
	plan := Policy{Routed: []netip.Prefix{
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("168.63.0.0/16"),
	}}
	for _, tc := range []struct {
		policy Policy
		r      string
		in     string // "" = remapped
	}{
		{r: "10.244.0.0/16"},
		{r: "172.16.0.0/12"},
		{r: "192.168.0.0/16"},
		{r: "100.64.0.0/10"},
		{policy: plan, r: "172.20.0.0/16", in: "172.16.0.0/12"},
		{policy: plan, r: "172.16.0.0/12"}, // holds AWS's resolver
		{policy: plan, r: "172.31.0.0/16"}, // holds it
		{policy: plan, r: "172.31.0.0/30"}, // is it
		{policy: plan, r: "172.31.0.2/32"}, // in it
		{policy: plan, r: "172.31.0.4/30", in: "172.16.0.0/12"},
		{policy: plan, r: "100.64.0.0/10"},  // holds Alibaba's services
		{policy: plan, r: "100.100.2.0/24"}, // in them
		{policy: plan, r: "100.64.0.0/16", in: "100.64.0.0/10"},
		{policy: plan, r: "168.63.129.16/32"},
		{policy: plan, r: "168.63.128.0/24", in: "168.63.0.0/16"},
		{policy: plan, r: "10.244.0.0/16"}, // outside the plan
		{policy: plan, r: "172.0.0.0/8"},   // holds the plan
	} {
		got, ok := tc.policy.RoutedIn(netip.MustParsePrefix(tc.r))
		if tc.in == "" {
			if ok {
				t.Errorf("%v.RoutedIn(%s) = %s, true; want remapped", tc.policy.Routed, tc.r, got)
			}
			if p := tc.policy.Placement(netip.MustParsePrefix(tc.r)); p != "remapped" {
				t.Errorf("Placement(%s) = %q, want remapped", tc.r, p)
			}
			continue
		}
		if !ok || got.String() != tc.in {
			t.Errorf("%v.RoutedIn(%s) = %s, %t; want %s", tc.policy.Routed, tc.r, got, ok, tc.in)
		}
		if p, want := tc.policy.Placement(netip.MustParsePrefix(tc.r)), "routed as it is (in plan "+tc.in+")"; p != want {
			t.Errorf("Placement(%s) = %q, want %q", tc.r, p, want)
		}
	}
}

func TestValidateRouted(t *testing.T) {
	err := ValidateRouted([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16")})
	if err == nil || !strings.Contains(err.Error(), "routed range 1 (169.254.0.0/16)") {
		t.Errorf("ValidateRouted = %v, want it to name routed range 1", err)
	}
}
