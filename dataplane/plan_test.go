package dataplane

import (
	"encoding/json"
	"flag"
	"fmt"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/peerlink/peerlink/dataplane/overlay"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/dataplane")

const goldenDir = "../testdata/dataplane"

// gatewayFactsFile is the JSON form of GatewayFacts in the golden cases.
type gatewayFactsFile struct {
	Role          Role   `json:"role"`
	PrivateKey    string `json:"privateKey"`
	PeerPublicKey string `json:"peerPublicKey"`
	ListenPort    int    `json:"listenPort"`
	Endpoint      string `json:"endpoint"`
	MTU           int    `json:"mtu"`
	Keepalive     string `json:"keepalive"`
	Remote        []struct {
		Real     string `json:"real"`
		Remapped string `json:"remapped"`
	} `json:"remote"`
	LocalRanges []string `json:"localRanges"`
	Overlay     struct {
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
	if f.PrivateKey, err = wgtypes.ParseKey(j.PrivateKey); err != nil {
		t.Fatal(err)
	}
	if f.PeerPublicKey, err = wgtypes.ParseKey(j.PeerPublicKey); err != nil {
		t.Fatal(err)
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
	f.Overlay = GatewayOverlay{Kind: overlay.Kind(j.Overlay.Kind), Address: netip.MustParseAddr(j.Overlay.Address), MTU: j.Overlay.MTU}
	if j.Overlay.Node != "" {
		f.Overlay.Node = netip.MustParseAddr(j.Overlay.Node)
	}
	return f
}

// fabricFactsFile is the JSON form of FabricFacts in the golden cases.
type fabricFactsFile struct {
	Node          string   `json:"node"`
	OverlayKind   string   `json:"overlayKind"`
	OverlayMTU    int      `json:"overlayMTU"`
	PodCIDRs      []string `json:"podCIDRs"`
	UnknownSource string   `json:"unknownSource"`
	Gateways      []struct {
		Name    string   `json:"name"`
		Address string   `json:"address"`
		Node    string   `json:"node"`
		Local   bool     `json:"local"`
		Ranges  []string `json:"ranges"`
	} `json:"gateways"`
}

func (j fabricFactsFile) facts() FabricFacts {
	f := FabricFacts{
		Node:          netip.MustParseAddr(j.Node),
		OverlayKind:   overlay.Kind(j.OverlayKind),
		OverlayMTU:    j.OverlayMTU,
		UnknownSource: netip.MustParseAddr(j.UnknownSource),
	}
	for _, p := range j.PodCIDRs {
		f.PodCIDRs = append(f.PodCIDRs, netip.MustParsePrefix(p))
	}
	for _, g := range j.Gateways {
		// A gateway without an address stands for a peer without a pod.
		fg := FabricGateway{Name: g.Name, Local: g.Local}
		if g.Address != "" {
			fg.Address, fg.Node = netip.MustParseAddr(g.Address), netip.MustParseAddr(g.Node)
		}
		for _, r := range g.Ranges {
			fg.Ranges = append(fg.Ranges, netip.MustParsePrefix(r))
		}
		f.Gateways = append(f.Gateways, fg)
	}
	return f
}

func TestPlanGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(goldenDir, "*", "facts.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases in %s: %v", goldenDir, err)
	}
	for _, factsFile := range dirs {
		dir := filepath.Dir(factsFile)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			raw, err := os.ReadFile(factsFile)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			if strings.HasPrefix(filepath.Base(dir), "fabric-") {
				var j fabricFactsFile
				if err := json.Unmarshal(raw, &j); err != nil {
					t.Fatal(err)
				}
				p, err := PlanFabric(j.facts())
				if err != nil {
					t.Fatal(err)
				}
				got = p.String()
			} else {
				var j gatewayFactsFile
				if err := json.Unmarshal(raw, &j); err != nil {
					t.Fatal(err)
				}
				p, err := PlanGateway(j.facts(t))
				if err != nil {
					t.Fatal(err)
				}
				got = p.String()
			}
			golden := filepath.Join(dir, "plan.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("plan differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", golden, got, want)
			}
		})
	}
}

func validGatewayFacts(t *testing.T) GatewayFacts {
	raw, err := os.ReadFile(filepath.Join(goldenDir, "gateway-server-remap", "facts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var j gatewayFactsFile
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	return j.facts(t)
}

func TestPlanGatewayRejectsBadFacts(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*GatewayFacts)
		want   string
	}{
		"no role":         {func(f *GatewayFacts) { f.Role = "" }, `role ""`},
		"no private key":  {func(f *GatewayFacts) { f.PrivateKey = wgtypes.Key{} }, "private key: missing"},
		"no peer key":     {func(f *GatewayFacts) { f.PeerPublicKey = wgtypes.Key{} }, "peer public key: missing"},
		"server, no port": {func(f *GatewayFacts) { f.ListenPort = 0 }, "listen port 0"},
		"tiny MTU":        {func(f *GatewayFacts) { f.MTU = 100 }, "MTU 100"},
		"length mismatch": {func(f *GatewayFacts) { f.Remote[0].Remapped = netip.MustParsePrefix("10.71.0.0/24") }, "length of the real one"},
		"host bits":       {func(f *GatewayFacts) { f.Remote[0].Real = netip.MustParsePrefix("10.244.1.0/16") }, "host bits set"},
		"overlap": {func(f *GatewayFacts) {
			f.Remote = append(f.Remote, RangeMapping{Real: netip.MustParsePrefix("10.244.7.0/24"), Remapped: netip.MustParsePrefix("10.80.7.0/24")})
		}, "remote ranges 10.244.0.0/16 and 10.244.7.0/24 overlap"},
		"IPv6": {func(f *GatewayFacts) {
			f.Remote[0] = RangeMapping{Real: netip.MustParsePrefix("fd00::/64"), Remapped: netip.MustParsePrefix("fd01::/64")}
		}, "only IPv4"},
		"no overlay kind": {func(f *GatewayFacts) { f.Overlay.Kind = overlay.Auto }, `overlay kind "auto"`},
	} {
		f := validGatewayFacts(t)
		tc.mutate(&f)
		_, err := PlanGateway(f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: PlanGateway error = %v, want one containing %q", name, err, tc.want)
		}
	}
}

func TestPlanGatewayClientWithoutEndpointWaits(t *testing.T) {
	f := validGatewayFacts(t)
	f.Role = Client
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

// TestPlanFabricSkipsBadGateways gives PlanFabric one good gateway beside
// a bad one: the bad one is skipped, named with its reason, and the good
// one keeps its routes. Only the node's own facts fail the plan.
func TestPlanFabricSkipsBadGateways(t *testing.T) {
	base := FabricFacts{
		Node: netip.MustParseAddr("172.18.0.2"), OverlayKind: overlay.VXLAN, OverlayMTU: 1450,
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, UnknownSource: netip.MustParseAddr("10.70.0.1"),
	}
	gw := func(name string, ranges ...string) FabricGateway {
		g := FabricGateway{Name: name, Address: netip.MustParseAddr("10.244.0.10"), Local: true}
		for _, r := range ranges {
			g.Ranges = append(g.Ranges, netip.MustParsePrefix(r))
		}
		return g
	}
	good := gw("a", "10.71.0.0/16")
	for name, tc := range map[string]struct {
		bad  FabricGateway
		want string
	}{
		"two peers, one range": {gw("b", "10.71.0.0/24"), "range 10.71.0.0/24 overlaps 10.71.0.0/16 of another gateway"},
		"range in pod CIDR":    {gw("b", "10.244.5.0/24"), "range 10.244.5.0/24 overlaps pod CIDR 10.244.0.0/16"},
		"IPv6 range":           {gw("b", "fd00::/64"), "range fd00::/64 must be an IPv4 network"},
		"link-local range":     {gw("b", "169.254.0.0/16"), "169.254.0.0/16 refused (SpecialUse)"},
		"default route":        {gw("b", "0.0.0.0/0"), "0.0.0.0/0 refused (SpecialUse)"},
		"host bits":            {gw("b", "10.72.0.1/16"), "range 10.72.0.1/16 must be an IPv4 network"},
		"own ranges overlap":   {gw("b", "10.72.0.0/16", "10.72.3.0/24"), "ranges 10.72.0.0/16 and 10.72.3.0/24 overlap"},
		"IPv6 address":         {FabricGateway{Name: "b", Address: netip.MustParseAddr("fd00::1"), Local: true}, "address fd00::1 must be IPv4"},
		"remote gateway, no node": {FabricGateway{Name: "b", Address: netip.MustParseAddr("10.244.3.9"),
			Ranges: []netip.Prefix{netip.MustParsePrefix("10.73.0.0/16")}}, "node address invalid IP must be IPv4"},
	} {
		f := base
		f.Gateways = []FabricGateway{tc.bad, good}
		p, err := PlanFabric(f)
		if err != nil {
			t.Errorf("%s: PlanFabric = %v, want the good gateway planned", name, err)
			continue
		}
		if len(p.Skipped) != 1 || p.Skipped[0].Name != "b" || !strings.Contains(p.Skipped[0].Reason, tc.want) {
			t.Errorf("%s: skipped %+v, want gateway b with %q", name, p.Skipped, tc.want)
		}
		routed := false
		for _, r := range p.Routes.Routes {
			if r.Dst == good.Ranges[0] && !r.Unreachable {
				routed = true
			}
			for _, br := range tc.bad.Ranges {
				if r.Dst == br {
					t.Errorf("%s: the skipped gateway's range %s is routed", name, br)
				}
			}
		}
		if !routed {
			t.Errorf("%s: the good gateway's range is not routed", name)
		}
	}
	f := base
	f.PodCIDRs = nil
	if _, err := PlanFabric(f); err == nil || !strings.Contains(err.Error(), "pod CIDRs") {
		t.Errorf("PlanFabric without pod CIDRs: %v", err)
	}
}

// FuzzPlanFabric plans a node with gateways of arbitrary ranges: it never
// fails on them, and never routes a range that is not IPv4, overlaps the
// pod CIDRs or a special-use range, or overlaps another routed range.
func FuzzPlanFabric(f *testing.F) {
	f.Add("10.71.0.0/16", "10.72.0.0/16", "fd00::/64")
	f.Add("10.244.0.0/24", "0.0.0.0/0", "169.254.169.254/32")
	f.Add("10.71.0.0/16", "10.71.3.0/24", "10.73.0.1/16")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		facts := FabricFacts{
			Node: netip.MustParseAddr("172.18.0.2"), OverlayKind: overlay.VXLAN, OverlayMTU: 1450,
			PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, UnknownSource: netip.MustParseAddr("10.70.0.1"),
		}
		for i, s := range []string{a, b, c} {
			g := FabricGateway{Name: fmt.Sprintf("g%d", i), Address: netip.MustParseAddr("10.244.0.10"), Local: true}
			for _, f := range strings.Split(s, ",") {
				if p, err := netip.ParsePrefix(f); err == nil {
					g.Ranges = append(g.Ranges, p)
				}
			}
			facts.Gateways = append(facts.Gateways, g)
		}
		p, err := PlanFabric(facts)
		if err != nil {
			t.Fatalf("PlanFabric failed on gateway facts: %v", err)
		}
		var routed []netip.Prefix
		for _, r := range p.Routes.Routes {
			if r.Table != TablePodSources {
				continue
			}
			if !r.Dst.Addr().Is4() || r.Dst.Overlaps(facts.PodCIDRs[0]) || rangepolicy.CheckRoutable(r.Dst) != nil {
				t.Fatalf("routes %s", r.Dst)
			}
			routed = append(routed, r.Dst)
		}
		if i, j, ok := cidr.FirstOverlap(routed); ok {
			t.Fatalf("routes overlapping ranges %s and %s", routed[i], routed[j])
		}
	})
}
