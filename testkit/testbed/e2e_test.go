package testbed

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/testkit/testcluster"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// restoreGoal is the longest a broken data path may stay broken after a
// fault the agents repair by themselves.
const restoreGoal = 5 * time.Second

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, netv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

var (
	agentOnce sync.Once
	agentDir  string
	agentBin  string
	agentErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if agentDir != "" {
		_ = os.RemoveAll(agentDir)
	}
	os.Exit(code)
}

// agent builds peerlink-agent once per test binary.
func agent(t *testing.T) string {
	agentOnce.Do(func() {
		agentDir, agentErr = os.MkdirTemp("", "peerlink-agent-")
		if agentErr != nil {
			return
		}
		agentBin, agentErr = BuildAgent(context.Background(), agentDir)
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentBin
}

// up starts one API server per side and the peering.
func up(t *testing.T, remaps Remaps, opts ...Option) *Bed {
	t.Helper()
	netns.RequirePrivileged(t)
	bin := agent(t)
	s := scheme(t)
	var clusters [2]Cluster
	for i := range clusters {
		c := testcluster.Start(t, testcluster.WithScheme(s), testcluster.WithCRDDirs("../../bundles/install/crds"))
		clusters[i] = Cluster{Kubeconfig: c.Kubeconfig, Client: c.Client}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bed, err := Up(ctx, t.TempDir(), bin, clusters[0], clusters[1], remaps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range []*Running{bed.A, bed.B} {
				for name, p := range map[string]*proc.Process{"gateway": r.Gateway, "fabric": r.Fabric, "second node's fabric": r.Fabric2} {
					if p != nil {
						t.Logf("side %s %s log:\n%s", r.Side.Name, name, proc.Tail(p.Log, 40))
					}
				}
			}
		}
		if err := bed.Close(); err != nil {
			t.Errorf("tear down: %v", err)
		}
	})
	return bed
}

// seen translates an address of one side's pod CIDR of its family into the
// range the other side sees it under.
func seen(t *testing.T, addr netip.Addr, remapped netip.Prefix) netip.Addr {
	t.Helper()
	pods := PodCIDR
	if addr.Is6() {
		pods = PodCIDR6
	}
	a, err := cidr.Translate(addr, pods, remapped)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var (
	sameRemaps = Remaps{
		AOfB: [2]netip.Prefix{netip.MustParsePrefix("10.71.0.0/16"), netip.MustParsePrefix("10.72.0.0/16")},
		BOfA: [2]netip.Prefix{netip.MustParsePrefix("10.71.0.0/16"), netip.MustParsePrefix("10.72.0.0/16")},
	}
	// differentRemaps catches NAT bugs that identical setups hide: each side
	// must translate with its own view of the other.
	differentRemaps = Remaps{
		AOfB: [2]netip.Prefix{netip.MustParsePrefix("10.71.0.0/16"), netip.MustParsePrefix("10.72.0.0/16")},
		BOfA: [2]netip.Prefix{netip.MustParsePrefix("10.73.0.0/16"), netip.MustParsePrefix("10.74.0.0/16")},
	}
)

// plane is one address family of a bed: the addresses of the pods and how
// each side sees the other's pod range.
type plane struct {
	name string
	// pods are the addresses of a side's first pods (PodIPs or PodIPs6),
	// far its far pod's, gatewayA the address of A's gateway pod, which
	// B's last pod has too.
	pods          []netip.Addr
	far, gatewayA netip.Addr
	// aOfB is how side A sees B's pod range, bOfA how B sees A's.
	aOfB, bOfA netip.Prefix
}

// planes are the address families of a bed: IPv4, and IPv6 when remaps
// make the sides dual-stack.
func planes(bed *Bed, remaps Remaps) []plane {
	out := []plane{{name: "IPv4", pods: PodIPs, far: FarPodIP, gatewayA: bed.A.Side.GatewayIP, aOfB: remaps.AOfB[0], bOfA: remaps.BOfA[0]}}
	if remaps.DualStack() {
		out = append(out, plane{name: "IPv6", pods: PodIPs6, far: FarPodIP6, gatewayA: bed.A.Side.GatewayIP6, aOfB: remaps.AOfB6, bOfA: remaps.BOfA6})
	}
	return out
}

// checkBothWays pings and connects over TCP in both directions, in every
// address family of the bed, and checks the source address each server
// observes.
func checkBothWays(t *testing.T, bed *Bed, remaps Remaps) {
	t.Helper()
	for _, pl := range planes(bed, remaps) {
		checkPlane(t, bed, pl)
	}
}

// checkPlane is checkBothWays in one address family.
func checkPlane(t *testing.T, bed *Bed, pl plane) {
	t.Helper()
	ctx := context.Background()
	a1, b2 := bed.A.Side.Pods[0], bed.B.Side.Pods[1]
	bFromA := seen(t, pl.pods[1], pl.aOfB)
	aFromB := seen(t, pl.pods[0], pl.bOfA)

	took, err := WaitPing(ctx, a1, bFromA, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: first ping from A's pod %s to B's pod %s (seen as %s) after %v", pl.name, pl.pods[0], pl.pods[1], bFromA, took.Round(time.Millisecond))
	if _, err := WaitPing(ctx, b2, aFromB, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	got, err := ObserveTCP(b2, a1, bFromA, 8080)
	if err != nil {
		t.Fatal(err)
	}
	if got != aFromB {
		t.Errorf("%s: B's pod saw A's connection from %s, want %s (A's pod %s as B sees it)", pl.name, got, aFromB, pl.pods[0])
	}
	got, err = ObserveTCP(a1, b2, aFromB, 8081)
	if err != nil {
		t.Fatal(err)
	}
	if got != bFromA {
		t.Errorf("%s: A's pod saw B's connection from %s, want %s (B's pod %s as A sees it)", pl.name, got, bFromA, pl.pods[1])
	}

	// B's last pod has the address of A's gateway pod: A's gateway must
	// send the translated packet into the tunnel rather than take it for
	// itself, and accept the replies whose source is its own address.
	b3 := bed.B.Side.Pods[len(bed.B.Side.Pods)-1]
	b3FromA := seen(t, pl.gatewayA, pl.aOfB)
	got, err = ObserveTCP(b3, a1, b3FromA, 8083)
	if err != nil {
		t.Fatalf("%s: A's pod to B's pod at A's gateway address %s (seen as %s): %v", pl.name, pl.gatewayA, b3FromA, err)
	}
	if got != aFromB {
		t.Errorf("%s: B's pod at %s saw A's connection from %s, want %s", pl.name, pl.gatewayA, got, aFromB)
	}
	got, err = ObserveTCP(a1, b3, aFromB, 8084)
	if err != nil {
		t.Fatalf("%s: B's pod at A's gateway address %s to A's pod: %v", pl.name, pl.gatewayA, err)
	}
	if got != b3FromA {
		t.Errorf("%s: A's pod saw B's pod at %s from %s, want %s", pl.name, pl.gatewayA, got, b3FromA)
	}
}

// checkFarPod checks, in one address family, the traffic of A's pod on
// the node without the gateway: its node's fabric sends it through the
// overlay to the gateway on the other node; the gateway returns the
// answers to its own node, which routes them on as it routes any pod's
// traffic.
func checkFarPod(t *testing.T, bed *Bed, pl plane) {
	t.Helper()
	farA, b2 := bed.A.Side.FarPod, bed.B.Side.Pods[1]
	bFromA := seen(t, pl.pods[1], pl.aOfB)
	farAFromB := seen(t, pl.far, pl.bOfA)
	if _, err := WaitPing(context.Background(), farA, bFromA, 30*time.Second); err != nil {
		t.Fatalf("%s: A's pod on its second node to B's pod: %v", pl.name, err)
	}
	// The second node's default route leads to the first node, whose
	// fabric would carry the traffic too: the packets must leave the
	// second node already in the overlay.
	node2 := bed.A.Side.Node2.Netlink(t)
	before := linkTX(t, node2, dataplane.OverlayLink)
	_, _ = farA.Run("ping", "-c", "20", "-i", "0.01", "-W", "1", "-n", "-q", bFromA.String())
	if sent := linkTX(t, node2, dataplane.OverlayLink) - before; sent < 20 {
		t.Errorf("%s: the second node's overlay link sent %d packets while its pod sent 20 to the peer", pl.name, sent)
	}
	got, err := ObserveTCP(b2, farA, bFromA, 8085)
	if err != nil {
		t.Fatal(err)
	}
	if got != farAFromB {
		t.Errorf("%s: B's pod saw the connection of A's far pod from %s, want %s", pl.name, got, farAFromB)
	}
	got, err = ObserveTCP(farA, b2, farAFromB, 8086)
	if err != nil {
		t.Fatal(err)
	}
	if got != bFromA {
		t.Errorf("%s: A's far pod saw B's connection from %s, want %s", pl.name, got, bFromA)
	}
}

// waitConnection polls side r's Connection every 200 ms until check
// accepts it, and returns it; it fails t with the last error when that
// takes longer than timeout.
func waitConnection(t *testing.T, r *Running, timeout time.Duration, check func(*netv1beta1.Connection) error) *netv1beta1.Connection {
	t.Helper()
	key := client.ObjectKey{Namespace: r.Peering.Namespace(), Name: netv1beta1.GatewayObjectPrefix + r.Peering.GatewayName()}
	deadline := time.Now().Add(timeout)
	for {
		var conn netv1beta1.Connection
		err := r.Cluster.Client.Get(context.Background(), key, &conn)
		if err == nil {
			if err = check(&conn); err == nil {
				return &conn
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("side %s: Connection %s: %v", r.Side.Name, key, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitConnected waits for side r's Connection to be Connected, and checks
// that it has a latency and is owned by the gateway object it refers to.
func waitConnected(t *testing.T, r *Running) {
	t.Helper()
	conn := waitConnection(t, r, 30*time.Second, func(conn *netv1beta1.Connection) error {
		if conn.Status.Value != netv1beta1.Connected {
			return fmt.Errorf("not Connected: %+v", conn.Status)
		}
		return nil
	})
	if conn.Status.Latency.Value == "" {
		t.Errorf("Connection %s/%s is Connected without a latency", conn.Namespace, conn.Name)
	}
	if len(conn.OwnerReferences) != 1 || conn.Spec.GatewayRef.UID == "" || conn.OwnerReferences[0].UID != conn.Spec.GatewayRef.UID {
		t.Errorf("Connection %s/%s: owner %+v, gatewayRef %+v; want both on the gateway object", conn.Namespace, conn.Name, conn.OwnerReferences, conn.Spec.GatewayRef)
	}
}

func TestPeeringSameRemap(t *testing.T) {
	bed := up(t, sameRemaps)
	checkBothWays(t, bed, sameRemaps)
	waitConnected(t, bed.A)
	waitConnected(t, bed.B)
}

func TestPeeringDifferentRemaps(t *testing.T) {
	bed := up(t, differentRemaps)
	checkBothWays(t, bed, differentRemaps)
	waitConnected(t, bed.A)
	waitConnected(t, bed.B)
	ctx := context.Background()
	a1 := bed.A.Side.Pods[0]
	bFromA := seen(t, PodIPs[1], differentRemaps.AOfB[0])

	t.Run("outside the peer's ranges", func(t *testing.T) {
		// The node sends a destination outside the peer's ranges into the
		// overlay towards the gateway, as a stray route would (in a table of
		// its own: the fabric removes what it did not plan from its tables).
		node := bed.A.Side.Node
		gwIP := bed.A.Side.GatewayIP.String()
		node.MustRun(t, "ip", "route", "add", "10.99.0.0/24", "encap", "ip", "id", "6091", "dst", gwIP,
			"via", gwIP, "dev", dataplane.OverlayLink, "onlink", "table", "99")
		node.MustRun(t, "ip", "rule", "add", "to", "10.99.0.0/24", "lookup", "99", "priority", "99")
		defer node.MustRun(t, "ip", "rule", "del", "priority", "99")
		gw := bed.A.Side.Gateway.Netlink(t)
		before := linkTX(t, gw, dataplane.TunnelLink)
		const sent = 200
		_, _ = a1.Run("ping", "-c", "200", "-i", "0.002", "-W", "1", "-n", "-q", "10.99.0.1")
		after := linkTX(t, gw, dataplane.TunnelLink)
		// Health pings cross the tunnel meanwhile: a few packets, never
		// the 200 sent.
		if after-before >= sent/4 {
			t.Errorf("the tunnel sent %d packets while %d went to 10.99.0.1, outside the peer's ranges", after-before, sent)
		}
		if err := Ping(a1, bFromA); err != nil {
			t.Errorf("the peer is unreachable after the test: %v", err)
		}
	})

	t.Run("a pod on the node without the gateway", func(t *testing.T) {
		checkFarPod(t, bed, planes(bed, differentRemaps)[0])
	})

	t.Run("a node's own traffic leaves as the unknown source", func(t *testing.T) {
		got, err := ObserveTCP(bed.B.Side.Pods[1], bed.A.Side.Node, bFromA, 8082)
		if err != nil {
			t.Fatal(err)
		}
		unknown, err := cidr.Translate(dataplane.UnknownSource(ExternalCIDR), ExternalCIDR, differentRemaps.BOfA[1])
		if err != nil {
			t.Fatal(err)
		}
		if got != unknown {
			t.Errorf("B's pod saw A's node from %s, want %s (A's unknown-source address %s as B sees it)", got, unknown, dataplane.UnknownSource(ExternalCIDR))
		}
	})

	t.Run("no active gateway pod: the peer's ranges are dropped, then unreachable", func(t *testing.T) {
		setActive(t, bed.A, "false")
		checkWithoutGateway(t, bed.A.Side.Node, a1, differentRemaps.AOfB[0], bFromA)
		setActive(t, bed.A, "true")
		if _, err := WaitPing(ctx, a1, bFromA, 30*time.Second); err != nil {
			t.Fatalf("the peer once its gateway pod is active again: %v", err)
		}
	})

	t.Run("tunnel link deleted", func(t *testing.T) {
		bed.B.Side.Gateway.MustRun(t, "ip", "link", "del", dataplane.TunnelLink)
		took, err := WaitPing(ctx, a1, bFromA, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("traffic restored %v after the server's %s was deleted (goal %v)", took.Round(time.Millisecond), dataplane.TunnelLink, restoreGoal)
		if took > restoreGoal {
			t.Errorf("restored after %v, goal %v", took, restoreGoal)
		}
	})

	t.Run("nftables table flushed", func(t *testing.T) {
		bed.A.Side.Gateway.MustRun(t, "nft", "flush", "table", "ip", dataplane.GatewayNFTable)
		took, err := WaitPing(ctx, a1, bFromA, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("traffic restored %v after the client's nftables table was flushed (goal %v)", took.Round(time.Millisecond), restoreGoal)
		if took > restoreGoal {
			t.Errorf("restored after %v, goal %v", took, restoreGoal)
		}
		if out := bed.A.Side.Gateway.MustRun(t, "nft", "list", "table", "ip", dataplane.GatewayNFTable); !strings.Contains(out, "dnat ip prefix to ip daddr map @remapped_to_real") {
			t.Errorf("table after repair:\n%s", out)
		}
	})

	t.Run("gateway killed and restarted", func(t *testing.T) {
		checkGatewayRestart(t, bed, differentRemaps, bFromA)
	})

	t.Run("a fabric restart drops nothing", func(t *testing.T) {
		checkFabricRestart(t, bed, bFromA)
	})

	t.Run("graceful stop leaves the fabric's state; removal on uninstall", func(t *testing.T) {
		stopAndUninstall(t, bed, differentRemaps)
	})
}

// checkGatewayRestart kills each side's gateway agent (SIGKILL) and
// starts it again: traffic from A's first pod to dst, an address of B's
// pods as A sees it, resumes within restoreGoal of the kill, and then
// checkBothWays passes.
func checkGatewayRestart(t *testing.T, bed *Bed, remaps Remaps, dst netip.Addr) {
	t.Helper()
	a1 := bed.A.Side.Pods[0]
	for _, r := range []*Running{bed.B, bed.A} {
		r.Gateway.Kill()
		start := time.Now()
		if err := r.StartGateway(); err != nil {
			t.Fatal(err)
		}
		if _, err := WaitPing(context.Background(), a1, dst, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		// From the kill, not from the first ping: the restart counts.
		took := time.Since(start)
		t.Logf("traffic to %s resumed %v after the %s gateway agent was killed (SIGKILL) and restarted (goal %v)", dst, took.Round(time.Millisecond), r.Peering.Role, restoreGoal)
		if took > restoreGoal {
			t.Errorf("%s: resumed after %v, goal %v", r.Peering.Role, took, restoreGoal)
		}
	}
	checkBothWays(t, bed, remaps)
}

// checkFabricRestart stops the fabric of A's gateway node (SIGTERM, as a
// rollout or a drain does) and starts it again while A's first pod pings
// dst every 20 ms: its routes, rules, link and tables stay in place, and
// no ping is lost.
func checkFabricRestart(t *testing.T, bed *Bed, dst netip.Addr) {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		out, _ := bed.A.Side.Pods[0].Run("ping", "-c", "150", "-i", "0.02", "-W", "1", "-n", "-q", dst.String())
		done <- out
	}()
	time.Sleep(500 * time.Millisecond)
	if err := bed.A.Fabric.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop the fabric: %v\n%s", err, proc.Tail(bed.A.Fabric.Log, 20))
	}
	tables := bed.A.Side.Node.MustRun(t, "nft", "list", "tables")
	if !strings.Contains(tables, dataplane.FabricNFTable) {
		t.Errorf("the stopped fabric removed its table:\n%s", tables)
	}
	time.Sleep(500 * time.Millisecond)
	p, err := bed.A.Fabric.Again()
	if err != nil {
		t.Fatal(err)
	}
	bed.A.Fabric = p
	out := <-done
	if !strings.Contains(out, " 0% packet loss") {
		t.Errorf("pings of %s across the fabric's restart were lost:\n%s", dst, out)
	}
	t.Logf("pings of %s across the fabric's restart: %s", dst, strings.TrimSpace(out[strings.LastIndex(out, "150 packets"):]))
}

// stopAndUninstall stops every agent of bed and checks that the fabric's
// state stays, in every family of the bed, then runs the fabrics once more
// with --cleanup-on-exit, as uninstalling does, and checks that nothing of
// peerlink is left of either family.
func stopAndUninstall(t *testing.T, bed *Bed, remaps Remaps) {
	t.Helper()
	fabricTables := []string{"table ip " + dataplane.FabricNFTable}
	if remaps.DualStack() {
		fabricTables = append(fabricTables, "table ip6 "+dataplane.FabricNFTable)
	}
	for _, r := range []*Running{bed.A, bed.B} {
		for _, p := range []*proc.Process{r.Gateway, r.Fabric, r.Fabric2} {
			if err := p.Stop(10 * time.Second); err != nil {
				t.Fatalf("side %s: %v\n%s", r.Side.Name, err, proc.Tail(p.Log, 20))
			}
		}
		for _, ns := range []*netns.NS{r.Side.Node, r.Side.Node2} {
			if tables := ns.MustRun(t, "nft", "list", "tables"); !containsAll(tables, fabricTables) {
				t.Errorf("side %s: a stopped fabric removed its tables in %s: %q, want %q", r.Side.Name, ns.Name, tables, fabricTables)
			}
		}
		// Uninstalling: the fabric runs once more with --cleanup-on-exit,
		// then stops.
		for _, p := range []*proc.Process{r.Fabric, r.Fabric2} {
			q, err := p.Again("--cleanup-on-exit")
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second)
			if err := q.Stop(10 * time.Second); err != nil {
				t.Fatalf("side %s: %v\n%s", r.Side.Name, err, proc.Tail(q.Log, 20))
			}
		}
		for _, ns := range []*netns.NS{r.Side.Gateway, r.Side.Node, r.Side.Node2} {
			links := ns.MustRun(t, "ip", "-o", "link")
			for _, l := range []string{dataplane.TunnelLink, dataplane.OverlayLink} {
				if strings.Contains(links, l) {
					t.Errorf("side %s: link %s left in %s", r.Side.Name, l, ns.Name)
				}
			}
			if tables := ns.MustRun(t, "nft", "list", "tables"); strings.Contains(tables, "peerlink") {
				t.Errorf("side %s: nftables tables left in %s:\n%s", r.Side.Name, ns.Name, tables)
			}
			// Rules without an address are installed in both families,
			// whatever the families of the ranges.
			for _, fam := range []string{"-4", "-6"} {
				if rules := ns.MustRun(t, "ip", fam, "rule"); strings.Contains(rules, "lookup 18") || strings.Contains(rules, "not from") ||
					!strings.Contains(rules, "0:\tfrom all lookup local") {
					t.Errorf("side %s: rules left in %s (ip %s rule):\n%s", r.Side.Name, ns.Name, fam, rules)
				}
			}
		}
	}
}

// checkWithoutGateway checks what node does with the peer's range rng once
// its gateway pod stopped being active: while a hand-over may still come
// (dataplane.HandOverGrace) it drops the packets silently, and a ping of dst
// from pod gets no answer and no error; then it rejects them, and the ping
// gets an unreachable error from the node. Never does it route them out of
// its default route.
func checkWithoutGateway(t *testing.T, node, pod *netns.NS, rng netip.Prefix, dst netip.Addr) {
	t.Helper()
	fam := "-4"
	if rng.Addr().Is6() {
		fam = "-6"
	}
	waitRoute := func(route string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !strings.Contains(node.MustRun(t, "ip", fam, "route", "show", "table", "all"), route) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q route on the node %v after its gateway pod stopped being active", route, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	start := time.Now()
	waitRoute("blackhole "+rng.String(), restoreGoal)
	if out, err := pod.Run("ping", "-c", "1", "-W", "1", "-n", dst.String()); err == nil || strings.Contains(strings.ToLower(out), "unreachable") {
		t.Errorf("ping of the peer handing its gateway over: %v\n%s\nwant no answer and no error", err, out)
	}
	waitRoute("unreachable "+rng.String(), dataplane.HandOverGrace+restoreGoal)
	t.Logf("the peer's range %s dropped, then unreachable after %.1fs", rng, time.Since(start).Seconds())
	out, err := pod.Run("ping", "-c", "1", "-W", "2", "-n", dst.String())
	if err == nil || !strings.Contains(strings.ToLower(out), "unreachable") {
		t.Errorf("ping of the peer without a gateway pod: %v\n%s\nwant an unreachable error from the node", err, out)
	}
}

// setActive sets the active label of the gateway pod of side r.
func setActive(t *testing.T, r *Running, value string) {
	t.Helper()
	ctx := context.Background()
	var pods corev1.PodList
	if err := r.Cluster.Client.List(ctx, &pods, client.InNamespace(r.Peering.Namespace()), client.HasLabels{netv1beta1.ActiveGatewayLabel}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("side %s: %d gateway pods, want 1", r.Side.Name, len(pods.Items))
	}
	pod := &pods.Items[0]
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Labels[netv1beta1.ActiveGatewayLabel] = value
	if err := r.Cluster.Client.Patch(ctx, pod, patch); err != nil {
		t.Fatal(err)
	}
}

// linkTX is the number of packets a link has sent.
func linkTX(t *testing.T, h *netlink.Handle, name string) uint64 {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Statistics.TxPackets
}
