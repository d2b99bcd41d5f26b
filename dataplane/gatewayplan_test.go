package dataplane

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerlink/peerlink/api/gatewayrole"
	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/plan"
)

// gatewayFactsFile is the JSON form of GatewayFacts in the golden cases.
type gatewayFactsFile struct {
	Role          gatewayrole.Role `json:"role"`
	PrivateKey    string           `json:"privateKey"`
	PeerPublicKey string           `json:"peerPublicKey"`
	// The next keys of a key rotation, optional.
	NextPrivateKey    string `json:"nextPrivateKey"`
	PeerNextPublicKey string `json:"peerNextPublicKey"`
	ListenPort        int    `json:"listenPort"`
	Endpoint          string `json:"endpoint"`
	MTU               int    `json:"mtu"`
	Keepalive         string `json:"keepalive"`
	Remote            []struct {
		Real     string `json:"real"`
		Remapped string `json:"remapped"`
	} `json:"remote"`
	LocalRanges []string `json:"localRanges"`
	// UnknownSource is optional.
	UnknownSource string `json:"unknownSource"`
	// IPs, the remapped hosts, are optional.
	IPs []struct {
		Local    string `json:"local"`
		Remapped string `json:"remapped"`
	} `json:"ips"`
	Overlay struct {
		Kind    string `json:"kind"`
		Address string `json:"address"`
		Node    string `json:"node"`
		MTU     int    `json:"mtu"`
	} `json:"overlay"`
}

func (j gatewayFactsFile) facts(t *testing.T) GatewayFacts {
	t.Helper()
	f := GatewayFacts{Role: j.Role, ListenPort: j.ListenPort, MTU: j.MTU}
	var err error
	if f.PrivateKey, err = plan.ParseKey(j.PrivateKey); err != nil {
		t.Fatal(err)
	}
	if f.PeerPublicKey, err = plan.ParseKey(j.PeerPublicKey); err != nil {
		t.Fatal(err)
	}
	if j.NextPrivateKey != "" {
		if f.NextPrivateKey, err = plan.ParseKey(j.NextPrivateKey); err != nil {
			t.Fatal(err)
		}
	}
	if j.PeerNextPublicKey != "" {
		if f.PeerNextPublicKey, err = plan.ParseKey(j.PeerNextPublicKey); err != nil {
			t.Fatal(err)
		}
	}
	if j.Endpoint != "" {
		f.Endpoint = netip.MustParseAddrPort(j.Endpoint)
	}
	if f.Keepalive, err = time.ParseDuration(j.Keepalive); err != nil {
		t.Fatal(err)
	}
	for _, r := range j.Remote {
		f.Remote = append(f.Remote, RangeMapping{Real: netip.MustParsePrefix(r.Real), Remapped: netip.MustParsePrefix(r.Remapped)})
	}
	for _, r := range j.LocalRanges {
		f.LocalRanges = append(f.LocalRanges, netip.MustParsePrefix(r))
	}
	if j.UnknownSource != "" {
		f.UnknownSource = netip.MustParseAddr(j.UnknownSource)
	}
	for _, m := range j.IPs {
		f.IPs = append(f.IPs, IPMapping{Local: netip.MustParseAddr(m.Local), Remapped: netip.MustParseAddr(m.Remapped)})
	}
	f.Overlay = GatewayOverlay{Kind: plan.OverlayKind(j.Overlay.Kind), Address: netip.MustParseAddr(j.Overlay.Address), MTU: j.Overlay.MTU}
	if j.Overlay.Node != "" {
		f.Overlay.Node = netip.MustParseAddr(j.Overlay.Node)
	}
	return f
}

func validGatewayFacts(t *testing.T) GatewayFacts {
	var j gatewayFactsFile
	readFacts(t, filepath.Join(goldenDir, "gateway-server-remap"), &j)
	return j.facts(t)
}

func TestPlanGatewayRejectsBadFacts(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*GatewayFacts)
		want   string
	}{
		"no role":         {func(f *GatewayFacts) { f.Role = "" }, `role ""`},
		"no private key":  {func(f *GatewayFacts) { f.PrivateKey = plan.Key{} }, "private key: missing"},
		"no peer key":     {func(f *GatewayFacts) { f.PeerPublicKey = plan.Key{} }, "peer public key: missing"},
		"same next key":   {func(f *GatewayFacts) { f.NextPrivateKey = f.PrivateKey }, "next private key: the same key pair"},
		"same peer next":  {func(f *GatewayFacts) { f.PeerNextPublicKey = f.PeerPublicKey }, "peer next public key: the same"},
		"server, no port": {func(f *GatewayFacts) { f.ListenPort = 0 }, "listen port 0"},
		"tiny MTU":        {func(f *GatewayFacts) { f.MTU = 100 }, "MTU 100"},
		"negative path":   {func(f *GatewayFacts) { f.PathMTU = -1 }, "path MTU -1"},
		"length mismatch": {func(f *GatewayFacts) { f.Remote[0].Remapped = netip.MustParsePrefix("10.71.0.0/24") }, "length of the real one"},
		"host bits":       {func(f *GatewayFacts) { f.Remote[0].Real = netip.MustParsePrefix("10.244.1.0/16") }, "host bits set"},
		"overlap": {func(f *GatewayFacts) {
			f.Remote = append(f.Remote, RangeMapping{Real: netip.MustParsePrefix("10.244.7.0/24"), Remapped: netip.MustParsePrefix("10.80.7.0/24")})
		}, "remote ranges 10.244.0.0/16 and 10.244.7.0/24 overlap"},
		"family changed": {func(f *GatewayFacts) {
			f.Remote[0] = RangeMapping{Real: netip.MustParsePrefix("fd00::/112"), Remapped: netip.MustParsePrefix("10.71.0.0/16")}
		}, "remapped within its family"},
		"IPv6 narrow MTU": {func(f *GatewayFacts) {
			f.MTU = 1200
			f.Remote = append(f.Remote, RangeMapping{Real: netip.MustParsePrefix("fd00::/64"), Remapped: netip.MustParsePrefix("fd01::/64")})
		}, "need links of at least 1280"},
		"overlay families": {func(f *GatewayFacts) { f.Overlay.Node = netip.MustParseAddr("fd30::2") }, "overlay node address fd30::2"},
		"no overlay kind":  {func(f *GatewayFacts) { f.Overlay.Kind = "auto" }, `overlay kind "auto"`},
		"unknown source outside": {func(f *GatewayFacts) { f.UnknownSource = netip.MustParseAddr("10.71.0.0") },
			"unknown-source address 10.71.0.0"},
	} {
		f := validGatewayFacts(t)
		tc.mutate(&f)
		_, err := PlanGateway(f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: PlanGateway error = %v, want one containing %q", name, err, tc.want)
		}
	}
}

// TestPlanGatewayFamiliesWithoutPods plans a gateway of an IPv4-only
// cluster whose peer is dual-stack: the peer's IPv6 range is not peered,
// so nothing IPv6 is routed, allowed or translated.
func TestPlanGatewayFamiliesWithoutPods(t *testing.T) {
	f := validGatewayFacts(t)
	f.Remote = append(f.Remote, RangeMapping{Real: netip.MustParsePrefix("fd44::/48"), Remapped: netip.MustParsePrefix("fd00:71::/48")})
	p, err := PlanGateway(f)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(p.WireGuard.Peer.AllowedIPs, func(a netip.Prefix) bool { return a.Addr().Is6() }) {
		t.Errorf("allowed IPs %v hold an IPv6 range", p.WireGuard.Peer.AllowedIPs)
	}
	for _, r := range p.Routes.Routes {
		if r.Dst.Addr().Is6() && !r.Unreachable {
			t.Errorf("IPv6 route %s planned", r)
		}
	}
	if !p.NAT6.Empty() {
		t.Errorf("an ip6 table is planned: %s", p.NAT6)
	}
}

// TestPlanGatewayClampsToPathMTU checks the MSS the plan clamps TCP to: the
// tunnel's MTU, the measured path's when it is smaller, and never below
// the IPv4 minimum.
func TestPlanGatewayClampsToPathMTU(t *testing.T) {
	for _, tc := range []struct {
		mtu, pathMTU int
		want         uint16
	}{
		{1340, 0, 1300},
		{1340, 1340, 1300},
		{1340, 1232, 1192},
		{1340, 300, 536},
		{1280, 1400, 1240},
	} {
		f := validGatewayFacts(t)
		f.MTU, f.PathMTU = tc.mtu, tc.pathMTU
		p, err := PlanGateway(f)
		if err != nil {
			t.Fatal(err)
		}
		clamps := 0
		for _, c := range p.NAT.Chains {
			for _, r := range c.Rules {
				if r.ClampMSS == 0 {
					continue
				}
				clamps++
				if r.ClampMSS != tc.want {
					t.Errorf("MTU %d, path MTU %d: rule %q clamps to %d, want %d", tc.mtu, tc.pathMTU, r.Comment, r.ClampMSS, tc.want)
				}
			}
		}
		if clamps != 2 {
			t.Errorf("MTU %d, path MTU %d: %d clamping rules, want 2 (each way)", tc.mtu, tc.pathMTU, clamps)
		}
	}
}

// TestPlanGatewayStandby checks that a standby replica's plan is the
// active one's but for the WireGuard peer, which it has none of.
func TestPlanGatewayStandby(t *testing.T) {
	f := validGatewayFacts(t)
	active, err := PlanGateway(f)
	if err != nil {
		t.Fatal(err)
	}
	f.Standby = true
	standby, err := PlanGateway(f)
	if err != nil {
		t.Fatal(err)
	}
	if standby.WireGuard.Peer.PublicKey != (plan.Key{}) || len(standby.WireGuard.Peer.AllowedIPs) != 0 {
		t.Errorf("standby peer %+v, want none", standby.WireGuard.Peer)
	}
	if standby.WireGuard.PrivateKey != active.WireGuard.PrivateKey || standby.WireGuard.ListenPort != active.WireGuard.ListenPort {
		t.Errorf("standby WireGuard %+v, want the active's key and port", standby.WireGuard)
	}
	active.WireGuard.Peer = plan.WireGuardPeer{}
	if got, want := standby.String(), active.String(); got != want {
		t.Errorf("standby plan differs from the active's beyond the peer:\n%s\nwant:\n%s", got, want)
	}
}

func TestPlanGatewayClientWithoutEndpointWaits(t *testing.T) {
	f := validGatewayFacts(t)
	f.Role = gatewayrole.Client
	f.Endpoint = netip.AddrPort{}
	p, err := PlanGateway(f)
	if err != nil {
		t.Fatal(err)
	}
	if p.WireGuard.Peer.Endpoint.IsValid() || p.WireGuard.ListenPort != 0 {
		t.Errorf("client without endpoint: wireguard %+v", p.WireGuard)
	}
	if got := p.Routes.Addresses[0].Prefix.String(); got != "169.254.18.2/30" {
		t.Errorf("client tunnel address = %s", got)
	}
}

// TestMTUBoundsAreTheAPIs checks that the planner's tunnel MTU bounds are
// the ones the API validates.
func TestMaxIPsIsTheAPIs(t *testing.T) {
	if MaxIPs != ipamv1alpha1.MaxIPs {
		t.Errorf("planner MaxIPs %d, the API's %d", MaxIPs, ipamv1alpha1.MaxIPs)
	}
}

// TestPlanGatewayRejectsBadIPs checks the remapped hosts a gateway is
// given: each must be translatable, and no more than MaxIPs.
func TestPlanGatewayRejectsBadIPs(t *testing.T) {
	a := netip.MustParseAddr
	many := make([]IPMapping, MaxIPs+1)
	for i := range many {
		many[i] = IPMapping{Local: a("192.168.0.1"), Remapped: netip.AddrFrom4([4]byte{10, 70, byte(1 + i/256), byte(i % 256)})}
	}
	for _, tc := range []struct {
		name string
		ips  []IPMapping
		want string
	}{
		{"remapped outside the external range", []IPMapping{{Local: a("192.168.0.1"), Remapped: a("10.71.0.1")}}, "must be in the external range 10.70.0.0/16"},
		{"remapped to the unknown source", []IPMapping{{Local: a("192.168.0.1"), Remapped: a("10.70.0.0")}}, "not the unknown source"},
		{"local in a pod range", []IPMapping{{Local: a("10.244.0.9"), Remapped: a("10.70.0.1")}}, "outside the local ranges"},
		{"one address twice", []IPMapping{{Local: a("192.168.0.1"), Remapped: a("10.70.0.1")}, {Local: a("192.168.0.2"), Remapped: a("10.70.0.1")}}, "another host's"},
		{"too many", many, fmt.Sprintf("at most %d", MaxIPs)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := validGatewayFacts(t)
			f.IPs = tc.ips
			if _, err := PlanGateway(f); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("PlanGateway: %v, want an error with %q", err, tc.want)
			}
		})
	}
	f := validGatewayFacts(t)
	f.UnknownSource = netip.Addr{}
	f.IPs = []IPMapping{{Local: a("192.168.0.1"), Remapped: a("10.70.0.1")}}
	if _, err := PlanGateway(f); err == nil || !strings.Contains(err.Error(), "need the unknown-source address") {
		t.Fatalf("PlanGateway without an unknown source: %v, want an error", err)
	}
}

func TestMTUBoundsAreTheAPIs(t *testing.T) {
	if minMTU != netv1beta1.MinMTU || maxMTU != netv1beta1.MaxMTU {
		t.Errorf("planner MTU bounds %d-%d, the API's %d-%d", minMTU, maxMTU, netv1beta1.MinMTU, netv1beta1.MaxMTU)
	}
}
