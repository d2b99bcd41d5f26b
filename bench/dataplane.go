package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/overlay"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/testkit/testbed"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

const (
	// throughputRounds is how many times each path is measured; the table
	// shows the median, the paths taking turns so that the machine's other
	// load weighs on all alike.
	throughputRounds = 7
	// throughputRun is the length of one iperf3 run.
	throughputRun = 5 * time.Second
	// peerlinkVsWireGuardGoal is the floor of the peerlink path's
	// throughput as a share of bare wireguard-go's.
	peerlinkVsWireGuardGoal = 0.90
	// fabricPeersGoal is the floor of the fabric's forwarding throughput
	// with many peers as a share of its throughput with one.
	fabricPeersGoal = 0.95
)

// dataplaneTable measures TCP throughput, one iperf3 stream, and the CPU
// time the machine spends per byte carried, over four kinds of path built
// in network namespaces on this machine: pod to pod
// through peerlink (the real agents, gateways and fabric, against two real
// API servers), the same tunnel library (wireguard-go) bare at the same MTU,
// a bare veth, and a node running the fabric's plan for 1, 100 and 1,000
// peers.
func dataplaneTable(ctx context.Context) (*table, error) {
	if err := netns.Privileged(); err != nil {
		return nil, fmt.Errorf("dataplane table: %w (run `make bench` as root)", err)
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		return nil, fmt.Errorf("dataplane table: %w (hack/install-deps.sh installs iperf3)", err)
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join("bin", "k8s", "current")
	}
	crds := filepath.Join("bundles", "install", "crds")
	work, err := os.MkdirTemp("", "peerlink-bench-dataplane-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	bin, err := testbed.BuildAgent(ctx, work)
	if err != nil {
		return nil, err
	}
	wgbare, err := testbed.BuildWGBare(ctx, work)
	if err != nil {
		return nil, err
	}

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, netv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	var clusters [2]testbed.Cluster
	for i := range clusters {
		env := &envtest.Environment{Scheme: scheme, BinaryAssetsDirectory: assets, CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true}
		cfg, err := env.Start()
		if err != nil {
			return nil, fmt.Errorf("start control plane %d: %w", i, err)
		}
		defer func() { _ = env.Stop() }()
		kubeconfig := filepath.Join(work, fmt.Sprintf("cluster-%d.kubeconfig", i))
		if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
			return nil, err
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, err
		}
		clusters[i] = testbed.Cluster{Kubeconfig: kubeconfig, Client: c}
	}

	remaps := testbed.Remaps{
		AOfB: [2]netip.Prefix{netip.MustParsePrefix("10.71.0.0/16"), netip.MustParsePrefix("10.72.0.0/16")},
		BOfA: [2]netip.Prefix{netip.MustParsePrefix("10.73.0.0/16"), netip.MustParsePrefix("10.74.0.0/16")},
	}
	bed, err := testbed.Up(ctx, work, bin, clusters[0], clusters[1], remaps)
	if err != nil {
		return nil, err
	}
	defer bed.Close()
	dst, err := cidr.Translate(testbed.PodIPs[1], testbed.PodCIDR, remaps.AOfB[0])
	if err != nil {
		return nil, err
	}
	sender, receiver := bed.A.Side.Pods[0], bed.B.Side.Pods[1]
	if _, err := testbed.WaitPing(ctx, sender, dst, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("%w; gateway logs under %s", err, work)
	}

	type path struct {
		name string
		pair *testbed.Pair
		bps  []float64
		// cpu is the machine's busy CPU seconds per GB of each run.
		cpu []float64
	}
	paths := []*path{{name: "peerlink", pair: &testbed.Pair{Sender: sender, Receiver: receiver, Dst: dst}}}
	build := []struct {
		name string
		make func() (*testbed.Pair, error)
	}{
		{"wireguard-go", func() (*testbed.Pair, error) { return testbed.PodsOverWireGuard(wgbare, work, netv1beta1.DefaultMTU) }},
		{"wireguard-go-ends", func() (*testbed.Pair, error) { return testbed.BareWireGuard(wgbare, work, netv1beta1.DefaultMTU) }},
		{"veth", testbed.BareVeth},
		{"fabric-1", func() (*testbed.Pair, error) { return testbed.FabricNode(1, overlay.Auto) }},
		{"fabric-1000", func() (*testbed.Pair, error) { return testbed.FabricNode(1000, overlay.Auto) }},
		{"fabric-100", func() (*testbed.Pair, error) { return testbed.FabricNode(100, overlay.Auto) }},
	}
	for _, b := range build {
		p, err := b.make()
		if err != nil {
			return nil, fmt.Errorf("build the %s path: %w", b.name, err)
		}
		defer p.Close()
		paths = append(paths, &path{name: b.name, pair: p})
	}
	byName := map[string]*path{}
	for _, p := range paths {
		byName[p.name] = p
	}
	congestion, err := sender.Run("sysctl", "-n", "net.ipv4.tcp_congestion_control")
	if err != nil {
		return nil, err
	}
	before, err := testbed.ReadCPUTimes()
	if err != nil {
		return nil, err
	}
	// The paths compared by a ratio run one after the other, and every
	// other round runs backwards, so that load rising or falling through a
	// round weighs on both sides of each ratio alike.
	for round := range throughputRounds {
		order := slices.Clone(paths)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, p := range order {
			run, err := testbed.Iperf(ctx, p.pair.Receiver, p.pair.Sender, p.pair.Dst, throughputRun)
			if err != nil {
				return nil, fmt.Errorf("measure the %s path: %w", p.name, err)
			}
			if run.BitsPerSecond == 0 || run.Bytes == 0 {
				return nil, fmt.Errorf("the %s path measured 0 bit/s", p.name)
			}
			p.bps = append(p.bps, run.BitsPerSecond)
			p.cpu = append(p.cpu, run.CPUPerGB())
		}
	}
	after, err := testbed.ReadCPUTimes()
	if err != nil {
		return nil, err
	}
	stolenShare := (after.Stolen - before.Stolen).Seconds() / (after.All() - before.All()).Seconds()
	median := map[string]float64{}
	var spread []string
	for _, p := range paths {
		median[p.name] = medianOf(p.bps) / 1e9
		spread = append(spread, fmt.Sprintf("%s %.2f-%.2f", p.name, slices.Min(p.bps)/1e9, slices.Max(p.bps)/1e9))
	}
	// A ratio is the median of the ratios of each round, whose two runs
	// followed each other: the machine's other load, which changes from
	// minute to minute, weighs on both alike.
	ratio := func(a, b string) float64 { return medianRatio(byName[a].bps, byName[b].bps) }
	cpuRatio := func(a, b string) float64 { return medianRatio(byName[a].cpu, byName[b].cpu) }
	peerlink, wg, ends, veth := median["peerlink"], median["wireguard-go"], median["wireguard-go-ends"], median["veth"]
	f1, f100, f1000 := median["fabric-1"], median["fabric-100"], median["fabric-1000"]
	return &table{
		title: "Dataplane throughput (TCP, one iperf3 stream)",
		rows: []row{
			{name: "pod->pod through peerlink (ceiling: through bare wireguard-go)", measured: peerlink, goal: wg, unit: "Gbit/s", dir: atMost},
			{name: "pod->pod through bare wireguard-go, MTU 1340 (ceiling: bare veth)", measured: wg, goal: veth, unit: "Gbit/s", dir: atMost},
			{name: "bare wireguard-go end to end, MTU 1340 (ceiling: bare veth)", measured: ends, goal: veth, unit: "Gbit/s", dir: atMost},
			{name: "bare veth, MTU 1500 (ceiling: itself)", measured: veth, goal: veth, unit: "Gbit/s", dir: atMost},
			{name: "fabric node, 1 peer (ceiling: bare veth)", measured: f1, goal: veth, unit: "Gbit/s", dir: atMost},
			{name: "fabric node, 100 peers (ceiling: bare veth)", measured: f100, goal: veth, unit: "Gbit/s", dir: atMost},
			{name: "fabric node, 1,000 peers (ceiling: bare veth)", measured: f1000, goal: veth, unit: "Gbit/s", dir: atMost},
			{name: "goal: peerlink / bare wireguard-go, pod->pod", measured: ratio("peerlink", "wireguard-go"), goal: peerlinkVsWireGuardGoal, unit: "x", dir: atLeast},
			{name: "peerlink / bare wireguard-go end to end (ceiling: 1)", measured: ratio("peerlink", "wireguard-go-ends"), goal: 1, unit: "x", dir: atMost},
			{name: "CPU per GB: peerlink / bare wireguard-go, pod->pod (floor: 1)", measured: cpuRatio("peerlink", "wireguard-go"), goal: 1, unit: "x", dir: atLeast},
			{name: "fabric 100 peers / 1 peer", measured: ratio("fabric-100", "fabric-1"), goal: fabricPeersGoal, unit: "x", dir: atLeast},
			{name: "goal: fabric 1,000 peers / 1 peer", measured: ratio("fabric-1000", "fabric-1"), goal: fabricPeersGoal, unit: "x", dir: atLeast},
		},
		notes: []string{
			fmt.Sprintf("medians of %d runs of %v per path (after a first second left out), the paths taking turns, every other round backwards; a ratio is the median of the rounds' ratios; ranges (Gbit/s): %s", throughputRounds, throughputRun, strings.Join(spread, ", ")),
			"peerlink: pod -> node (fabric, VXLAN or Geneve overlay) -> gateway (NAT, wireguard-go) -> veth -> gateway -> node -> pod, both gateway agents running",
			"bare wireguard-go pod->pod: pod -> namespace running the same wireguard-go (one process per side, as two gateways are) -> veth -> the other -> pod, plain routes and nothing else; end to end: iperf3 on the tunnel links themselves, no pod",
			"fabric node: pod -> node -> overlay -> gateway namespace, the node holding the routes and nftables sets of every peer",
			fmt.Sprintf("CPU per GB: the machine's busy CPU time (all cores, whatever ran) per GB received, over the same part of each run; medians (s/GB): peerlink %.1f, bare wireguard-go pod->pod %.1f, end to end %.1f, veth %.1f",
				medianOf(byName["peerlink"].cpu), medianOf(byName["wireguard-go"].cpu), medianOf(byName["wireguard-go-ends"].cpu), medianOf(byName["veth"].cpu)),
			fmt.Sprintf("TCP congestion control: %s; CPU time stolen by the hypervisor during the runs: %.0f%%; load average at the end: %s",
				strings.TrimSpace(congestion), 100*stolenShare, loadAverage()),
		},
	}, nil
}

// medianOf returns the median of vs (the upper one of an even count).
func medianOf(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[len(s)/2]
}

// medianRatio returns the median of a[i]/b[i]: of the ratios of runs that
// followed each other.
func medianRatio(a, b []float64) float64 {
	rs := make([]float64, len(a))
	for i := range a {
		rs[i] = a[i] / b[i]
	}
	return medianOf(rs)
}

// loadAverage returns the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
