package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// TestHostilePeer is the trust boundary on real clusters: A is peered with B
// and C, and B's side turns hostile. What B sends through the normal flows
// (files for `bundle add`, Configurations that A's admin applies) is refused
// or remapped, A's nodes route none of it, and packets B's gateway puts in
// the tunnel reach nothing of A but its pods: not its nodes, not its
// Services, not C. Meanwhile B's pods keep reaching A's pods.
func TestHostilePeer(t *testing.T) {
	sideBySide(t)
	// A broad address plan for peers, as an admin might declare: routing
	// as it is is allowed in all of the private space, yet A's node
	// networks and the cloud's service addresses in it stay A's.
	ctx, l := newPeeredLabWith(t, 15*time.Minute, labctl.Options{
		Names:           []string{"hostile-a", "hostile-b", "hostile-c"},
		RoutedPeerCIDRs: cidr.MustPrefixes("10.0.0.0/8", "172.16.0.0/12", "100.64.0.0/10"),
	})
	a, b, c := l.Clusters[0], l.Clusters[1], l.Clusters[2]
	podsA, podsB, podsC := echoPods(t, ctx, l, a), echoPods(t, ctx, l, b), echoPods(t, ctx, l, c)
	checkTraffic(t, ctx, l, b, podsB[0], a, podsA[0])

	t.Run("bundle add refuses what B sends", func(t *testing.T) {
		ad := newAdmin(t, l, a)
		bundle := filepath.Join(ad.dir, "peers", b.ClusterID)
		ad.offline(t, ctx, "init.log", "bundle", "init", bundle, "--peer", b.ClusterID, "--role", "server")
		before := dirFiles(t, bundle)
		key := "bWFkZS11cCBidXQgY2Fub25pY2FsIHB1YmxpYyBrZXk="
		for name, file := range map[string]string{
			"link-local":         hostileConfiguration(b.ClusterID, "10.244.0.0/24", "169.254.0.0/16"),
			"loopback":           hostileConfiguration(b.ClusterID, "127.0.0.0/8", ""),
			"multicast":          hostileConfiguration(b.ClusterID, "224.0.0.0/4", ""),
			"public":             hostileConfiguration(b.ClusterID, "10.244.0.0/24", "8.8.8.0/24"),
			"default-route":      hostileConfiguration(b.ClusterID, "0.0.0.0/0", ""),
			"two-configurations": hostileConfiguration(b.ClusterID, "10.244.0.0/24", "") + "---\n" + hostileConfiguration(b.ClusterID, "10.245.0.0/24", ""),
			"two-public-keys":    hostilePublicKey(b.ClusterID, key) + "---\n" + hostilePublicKey(b.ClusterID, "YW5vdGhlciBtYWRlLXVwIGtleSBvZiAzMiBieXRlcyE="),
			"all-zero-key":       hostilePublicKey(b.ClusterID, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
			"too-large":          hostileConfiguration(b.ClusterID, "10.244.0.0/24", "") + "# " + strings.Repeat("x", 2<<20) + "\n",
		} {
			path := filepath.Join(ad.dir, "from-b-"+name+".yaml")
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := l.Peerlink(ctx, "bundle", "add", bundle, path, "--kubeconfig", filepath.Join(ad.dir, "no-cluster"))
			if err == nil {
				t.Errorf("bundle add of %s succeeded:\n%s", name, out)
			}
			if got := dirFiles(t, bundle); !maps.Equal(got, before) {
				t.Errorf("bundle add of %s changed the bundle", name)
			}
		}
	})

	// Configurations B's admin could talk A's admin into applying, each
	// as if for a peer of its own: refused, or for A's node network,
	// remapped away.
	nodeNet := a.NodeNetwork()
	refused := map[string]string{
		"link-local": "169.254.0.0/16",
		"loopback":   "127.0.0.0/8",
		"multicast":  "224.0.0.0/4",
		"public":     "8.8.8.0/24",
		"everything": "0.0.0.0/0",
	}
	t.Run("hostile Configurations stall or are remapped, and A's nodes route none of them", func(t *testing.T) {
		var manifests []string
		for name, r := range refused {
			manifests = append(manifests, hostileConfigurationIn("liqo-tenant-"+b.ClusterID, b.ClusterID+"-"+name, b.ClusterID+"-"+name, r, ""))
		}
		manifests = append(manifests,
			hostileConfigurationIn("liqo-tenant-"+b.ClusterID, b.ClusterID+"-nodes", b.ClusterID+"-nodes", nodeNet.String(), ""),
			// A second Configuration of B itself.
			hostileConfigurationIn("liqo-tenant-"+b.ClusterID, b.ClusterID+"-again", b.ClusterID, "10.250.0.0/16", ""))
		applyManifests(t, ctx, l, a, manifests)
		for name := range refused {
			waitCondition(t, ctx, l, a, "liqo-tenant-"+b.ClusterID, b.ClusterID+"-"+name, "Stalled", "True")
		}
		waitCondition(t, ctx, l, a, "liqo-tenant-"+b.ClusterID, b.ClusterID+"-again", "Stalled", "True")
		// The lab finds a peer's ranges in its one Configuration.
		mustKubectl(t, ctx, l, a, "-n", "liqo-tenant-"+b.ClusterID, "delete", "configuration", b.ClusterID+"-again")
		waitCondition(t, ctx, l, a, "liqo-tenant-"+b.ClusterID, b.ClusterID+"-nodes", "Ready", "True")
		got, err := l.Kubectl(ctx, a, "-n", "liqo-tenant-"+b.ClusterID, "get", "configuration", b.ClusterID+"-nodes",
			"-o", "jsonpath={.status.remote.cidr.pod[0]}")
		if err != nil {
			t.Fatal(err)
		}
		if remapped, err := netip.ParsePrefix(strings.TrimSpace(string(got))); err != nil || remapped.Overlaps(nodeNet) {
			t.Errorf("the range of A's node network %s is seen as %q: it must be remapped away", nodeNet, got)
		}
		// Wait for a fabric sync after the last Configuration.
		time.Sleep(3 * time.Second)
		routes := nodeRoutes(t, a)
		for _, r := range append(valuesOf(refused), nodeNet.String()) {
			for _, line := range routes {
				if strings.HasPrefix(line, r+" ") {
					t.Errorf("A's node routes the refused range %s in a peerlink table: %s", r, line)
				}
			}
		}
		nodeA := nodeNS(t, a)
		for _, addr := range []string{"169.254.169.254", "8.8.8.8", "127.0.0.2", a.NodeIP().String()} {
			out, err := nodeA.Run("ip", "route", "get", addr)
			if err == nil && (strings.Contains(out, dataplane.OverlayLink) || strings.Contains(out, "table 180")) {
				t.Errorf("A's node sends %s to a peer: %s", addr, out)
			}
		}
		checkTraffic(t, ctx, l, b, podsB[0], a, podsA[0])
	})

	t.Run("inside the plan, a range over A's node networks or a cloud address is remapped", func(t *testing.T) {
		// Every node of A reaches a network through a router besides its
		// default route (a peered network, say); its fabric publishes it.
		routed := netip.MustParsePrefix("10.123.0.0/16")
		for _, node := range a.Nodes() {
			nodeNS(t, node).MustRun(t, "ip", "route", "add", routed.String(), "via", cluster.HostIP(a.Index).String())
		}
		cs, err := a.Clientset()
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, "every node of A publishes its node network and "+routed.String(), func() error {
			nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, n := range nodes.Items {
				got := n.Annotations[clusterinfo.NodeSubnetsAnnotation]
				if want := rangepolicy.Format([]netip.Prefix{routed, nodeNet}); got != want {
					return fmt.Errorf("node %s publishes %q, want %q", n.Name, got, want)
				}
			}
			return nil
		})
		// Half of A's node network (no node address in it), a cloud's
		// metadata and DNS range, the network A's nodes route to, and a
		// range A uses nowhere, which the plan keeps as it is.
		inNodeNet := func(last byte) netip.Addr {
			a4 := nodeNet.Addr().As4()
			a4[3] = last
			return netip.AddrFrom4(a4)
		}
		cases := map[string]struct {
			pod  netip.Prefix
			kept bool
		}{
			"subnet":  {netip.PrefixFrom(inNodeNet(128), 25), false},
			"cloud":   {netip.MustParsePrefix("100.100.0.0/16"), false},
			"routed":  {routed, false},
			"planned": {netip.MustParsePrefix("10.124.0.0/16"), true},
		}
		var manifests []string
		for name, c := range cases {
			manifests = append(manifests, hostileConfigurationIn("liqo-tenant-"+b.ClusterID, b.ClusterID+"-"+name, b.ClusterID+"-"+name, c.pod.String(), ""))
		}
		applyManifests(t, ctx, l, a, manifests)
		for name, c := range cases {
			conf := b.ClusterID + "-" + name
			waitCondition(t, ctx, l, a, "liqo-tenant-"+b.ClusterID, conf, "Ready", "True")
			got, err := l.Kubectl(ctx, a, "-n", "liqo-tenant-"+b.ClusterID, "get", "configuration", conf, "-o", "jsonpath={.status.remote.cidr.pod[0]}")
			if err != nil {
				t.Fatal(err)
			}
			seen, err := netip.ParsePrefix(strings.TrimSpace(string(got)))
			switch {
			case err != nil:
				t.Errorf("%s: %s is seen as %q: %v", name, c.pod, got, err)
			case c.kept && seen != c.pod:
				t.Errorf("%s: %s is seen as %s, want it kept as it is (inside the plan, over nothing of A)", name, c.pod, seen)
			case !c.kept && seen.Overlaps(c.pod):
				t.Errorf("%s: %s is seen as %s, want it remapped away", name, c.pod, seen)
			}
		}
		time.Sleep(3 * time.Second)
		unused := inNodeNet(200)
		for _, node := range a.Nodes() {
			ns := nodeNS(t, node)
			for _, addr := range []string{unused.String(), "100.100.100.200", "10.123.4.5"} {
				out, err := ns.Run("ip", "route", "get", addr)
				if err != nil || strings.Contains(out, dataplane.OverlayLink) || strings.Contains(out, "table 180") {
					t.Errorf("node %s: ip route get %s: %s (%v): want it off the tunnel", node.Name(), addr, strings.TrimSpace(out), err)
				}
			}
		}
		checkTraffic(t, ctx, l, b, podsB[0], a, podsA[0])
	})

	t.Run("B's gateway reaches nothing of A but its pods", func(t *testing.T) {
		gw := gatewayAgent(t, ctx, l, b, a.ClusterID)
		nodePort := exposeNodePort(t, ctx, l, a)
		cIP, err := l.RemappedIP(ctx, a, c, podsC[0].Status.PodIP)
		if err != nil {
			t.Fatal(err)
		}
		clusterIP := strings.TrimSpace(string(mustKubectl(t, ctx, l, a, "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")))
		targets := []struct{ what, addr string }{
			{"A's kubelet", net.JoinHostPort(a.NodeIP().String(), "10250")},
			{"A's API server", net.JoinHostPort(a.NodeIP().String(), "6443")},
			{"a NodePort of A", net.JoinHostPort(a.NodeIP().String(), strconv.Itoa(nodePort))},
			{"A's ClusterIP", net.JoinHostPort(clusterIP, "443")},
			{"C's pod, through A", net.JoinHostPort(cIP.String(), strconv.Itoa(labctl.EchoPort))},
		}
		dropsBefore := ingressDrops(t, ctx, l, a, b.ClusterID)
		for _, tg := range targets {
			start := time.Now()
			if err := gw.connect(ctx, tg.addr); err == nil {
				t.Errorf("B's gateway connected to %s (%s) through the tunnel", tg.what, tg.addr)
			} else {
				t.Logf("B's gateway -> %s (%s): refused after %v: %v", tg.what, tg.addr, time.Since(start).Round(time.Millisecond), err)
			}
		}
		dropsAfter := ingressDrops(t, ctx, l, a, b.ClusterID)
		t.Logf("A's ingress drops from B: before %v, after %v", dropsBefore, dropsAfter)
		if sum(dropsAfter) <= sum(dropsBefore) {
			t.Errorf("A's ingress drop counters did not grow (before %v, after %v): the probes never reached A's filter", dropsBefore, dropsAfter)
		}
		checkTraffic(t, ctx, l, b, podsB[0], a, podsA[0])
		checkTraffic(t, ctx, l, a, podsA[1], b, podsB[1])
		checkTraffic(t, ctx, l, a, podsA[0], c, podsC[0])
		waitConnected(t, ctx, l, a, b)
	})
}

// applyManifests applies the YAML documents manifests to cluster n.
func applyManifests(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, manifests []string) {
	t.Helper()
	// kubectl -f takes a comma-separated list: a path without commas.
	f, err := os.CreateTemp("", "manifests-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(strings.Join(manifests, "---\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := l.Kubectl(ctx, n, "apply", "-f", f.Name()); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
}

// hostileConfiguration is a Configuration B's side could send A.
func hostileConfiguration(id, pod, external string) string {
	return hostileConfigurationIn("", id, id, pod, external)
}

// hostileConfigurationIn is a Configuration named name, in namespace ns
// unless empty, of the peer id, declaring pod and, unless empty, external.
func hostileConfigurationIn(ns, name, id, pod, external string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: networking.liqo.io/v1beta1\nkind: Configuration\nmetadata:\n  name: %s\n", name)
	if ns != "" {
		fmt.Fprintf(&b, "  namespace: %s\n", ns)
	}
	fmt.Fprintf(&b, "  labels:\n    liqo.io/remote-cluster-id: %s\nspec:\n  remote:\n    cidr:\n      pod: [%q]\n", id, pod)
	if external != "" {
		fmt.Fprintf(&b, "      external: [%q]\n", external)
	}
	return b.String()
}

// hostilePublicKey is a PublicKey B's side could send A. The ID is quoted:
// a cluster ID such as 0619e087 or 12345678 is a number to YAML.
func hostilePublicKey(id, key string) string {
	return fmt.Sprintf(`apiVersion: networking.liqo.io/v1beta1
kind: PublicKey
metadata:
  name: %q
  labels:
    liqo.io/remote-cluster-id: %q
    networking.liqo.io/gateway-resource: "true"
spec:
  publicKey: %s
`, id, id, key)
}

// dirFiles reads the files under dir, by path.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	fsys := os.DirFS(dir)
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			var b []byte
			b, err = fs.ReadFile(fsys, path)
			files[path] = string(b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// waitCondition waits until condition cond of Configuration ns/name of
// cluster n has status want.
func waitCondition(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, ns, name, cond, want string) {
	t.Helper()
	eventually(t, ctx, fmt.Sprintf("Configuration %s/%s %s=%s", ns, name, cond, want), func() error {
		out, err := l.Kubectl(ctx, n, "-n", ns, "get", "configuration", name,
			"-o", fmt.Sprintf(`jsonpath={.status.conditions[?(@.type=="%s")].status} {.status.conditions[?(@.type=="%s")].message}`, cond, cond))
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, want+" ") && got != want {
			return fmt.Errorf("%s is %q", cond, got)
		}
		return nil
	})
}

// nodeRoutes lists the routes of the fabric's tables on the node of n.
func nodeRoutes(t *testing.T, n *cluster.Cluster) []string {
	t.Helper()
	ns := nodeNS(t, n)
	var lines []string
	for _, table := range []int{dataplane.TablePodSources, dataplane.TableHostSources} {
		out := ns.MustRun(t, "ip", "route", "show", "table", strconv.Itoa(table))
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

func valuesOf(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func mustKubectl(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, args ...string) []byte {
	t.Helper()
	out, err := l.Kubectl(ctx, n, args...)
	if err != nil {
		t.Fatalf("kubectl %v on %s: %v\n%s", args, n.ClusterID, err, out)
	}
	return out
}

// exposeNodePort exposes the echo pods of cluster n through a NodePort
// Service and returns its node port.
func exposeNodePort(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster) int {
	t.Helper()
	mustKubectl(t, ctx, l, n, "-n", labctl.EchoNamespace, "expose", "deployment", labctl.EchoDeployment,
		"--name=echo-nodeport", "--type=NodePort", "--port="+strconv.Itoa(labctl.EchoPort))
	out := mustKubectl(t, ctx, l, n, "-n", labctl.EchoNamespace, "get", "service", "echo-nodeport", "-o", "jsonpath={.spec.ports[0].nodePort}")
	port, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("node port of echo-nodeport: %q", out)
	}
	return port
}

// gatewayAgent finds the gateway agent of cluster n for the peer peerID,
// by the UID of its gateway object: the agents of other clusters for the
// same peer have the same name and namespace.
func gatewayAgent(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) *hostileGateway {
	t.Helper()
	uid := strings.TrimSpace(string(mustKubectl(t, ctx, l, n, "-n", "liqo-tenant-"+peerID, "get", "gatewayservers,gatewayclients",
		"-o", "jsonpath={.items[0].metadata.uid}")))
	pid, ok := findAgent("gateway", func(_ int, cmdline string) bool {
		return strings.Contains(cmdline, "\x00--gateway-uid="+uid+"\x00")
	})
	if ok {
		gw := &hostileGateway{t: t, pid: pid}
		out, err := gw.run("ip", "-4", "-o", "addr", "show", "dev", "eth0")
		if err != nil {
			t.Fatalf("address of the gateway pod of %s: %v: %s", n.ClusterID, err, out)
		}
		f := strings.Fields(string(out))
		for i := range f {
			if f[i] == "inet" && i+1 < len(f) {
				gw.podIP = strings.Split(f[i+1], "/")[0]
			}
		}
		if gw.podIP == "" {
			t.Fatalf("no address on eth0 of the gateway pod of %s: %s", n.ClusterID, out)
		}
		return gw
	}
	t.Fatalf("no gateway agent of %s for peer %s found", n.ClusterID, peerID)
	return nil
}

// findAgent returns the pid of a peerlink-agent process of this machine
// running subcommand for which match holds, given the pid and the
// NUL-separated command line.
func findAgent(subcommand string, match func(pid int, cmdline string) bool) (int, bool) {
	pids, err := proc.Pids()
	if err != nil {
		return 0, false
	}
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(b), "\x00")
		if len(args) < 2 || filepath.Base(args[0]) != "peerlink-agent" || args[1] != subcommand || !match(pid, string(b)) {
			continue
		}
		return pid, true
	}
	return 0, false
}

// ingressDrops reads the ingress filter's drop counters of cluster n's
// gateway for peer peerID, by reason, from the gateway pod's metrics.
func ingressDrops(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) map[string]float64 {
	t.Helper()
	drops := map[string]float64{}
	for k, v := range gatewayMetrics(t, ctx, l, n, peerID) {
		if labels, ok := strings.CutPrefix(k, ingressDropMetric); ok && strings.HasPrefix(labels, "{") {
			drops[labels] = v
		}
	}
	return drops
}

// ingressDropMetric counts the packets the gateway's ingress filter drops.
const ingressDropMetric = "peerlink_gateway_ingress_dropped_packets_total"

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}
