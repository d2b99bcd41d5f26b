package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/peering"
	"github.com/peerlink/peerlink/templates"
)

// Figures of TestDiagnoseCauses.
const (
	// mismatchedMTU is the client's MTU while it differs from the server's
	// (the default).
	mismatchedMTU = 1300
	// udpTable is the host's nftables table that blocks UDP between the
	// two clusters' node networks.
	udpTable = "peerlink_e2e_udp"
	// absentLabel is a node label no node has: a DaemonSet that selects it
	// runs nowhere.
	absentLabel = "peerlink.io/e2e-absent"
)

// TestDiagnoseCauses breaks a healthy peering, one cause at a time, in each
// way `peerlink diagnose` tells apart, and checks that diagnose, run from the
// client's cluster with the server's kubeconfig, names that cause and only
// it; then the break is mended, and diagnose must find the peering healthy
// again before the next one:
//   - the two gateways' MTUs differ;
//   - no fabric agent on the client's node (stopped, and its routes removed
//     as an agent that never ran leaves none): peerlink verify fails, naming
//     the paths from that cluster;
//   - UDP blocked between the two clusters' node networks: the tunnel is
//     down with the peer's gateway running, and verify fails every path;
//   - the peer's gateway stopped (its controller too, so that nothing starts
//     it again): verify's paths with the peer stopped are TestServiceFailover's.
//
// The fifth cause diagnose checks, API servers whose clocks disagree, cannot
// be made in the lab: every cluster's API server reads this machine's one
// real-time clock, which no namespace separates. TestDiagnose covers it.
func TestDiagnoseCauses(t *testing.T) {
	sideBySide(t)
	ctx, l := newPeeredLab(t, 20*time.Minute, "dg-a", "dg-b")
	// a is the gateway client, b the server.
	a, b := l.Clusters[0], l.Clusters[1]
	checkHealthy(t, ctx, l, a, b)

	// The MTUs differ: the client's gateway is given another one.
	gwc := kubectlOut(t, ctx, l, a, "get", "gatewayclients", "-A", "-l", "liqo.io/remote-cluster-id="+b.ClusterID,
		"-o", "jsonpath={.items[0].metadata.namespace} {.items[0].metadata.name}")
	ns, name, _ := strings.Cut(gwc, " ")
	setMTU := func(mtu int) {
		kubectlOut(t, ctx, l, a, "-n", ns, "patch", "gatewayclient", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"mtu":%d}}`, mtu))
	}
	setMTU(mismatchedMTU)
	waitDiagnosis(t, ctx, l, a, b, "mtu", fmt.Sprintf("the peer's gateway announces %d", netv1beta1.DefaultMTU))
	setMTU(netv1beta1.DefaultMTU)
	checkHealthy(t, ctx, l, a, b)

	// No fabric agent on a's node. The agent that stops must take its
	// routes with it (--cleanup-on-exit): one that stops otherwise leaves
	// them to its successor, and traffic flows on without it.
	fabric := []string{"-n", labctl.PeerlinkNamespace, "patch", "daemonset", templates.FabricDaemonSet}
	kubectlOut(t, ctx, l, a, append(fabric, "--type=json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--cleanup-on-exit"}]`)...)
	kubectlOut(t, ctx, l, a, "-n", labctl.PeerlinkNamespace, "rollout", "status", "daemonset", templates.FabricDaemonSet, "--timeout=2m")
	kubectlOut(t, ctx, l, a, append(fabric, "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{%q:"true"}}}}}`, absentLabel))...)
	waitDiagnosis(t, ctx, l, a, b, "fabric", "no ready fabric agent on node "+a.Nodes()[0].Name())
	v, err := verify(t, ctx, l, a, b, "--attempts=3", "--timeout=60s")
	if err == nil || !failedFrom(v, a.ClusterID) {
		t.Errorf("peerlink verify without %s's fabric agent: %v, want every path from %s failed", a.ClusterID, err, a.ClusterID)
	}
	kubectlOut(t, ctx, l, a, append(fabric, "--type=json", "-p", `[{"op":"remove","path":"/spec/template/spec/nodeSelector"}]`)...)
	checkHealthy(t, ctx, l, a, b)

	// UDP blocked on the way between the clusters.
	blockUDP(t, a, b)
	waitDiagnosis(t, ctx, l, a, b, "tunnel", "the UDP path between the two clusters is blocked")
	v, err = verify(t, ctx, l, a, b, "--attempts=3", "--timeout=60s")
	if err == nil || len(v.Paths) != 6 || v.Failed() != len(v.Paths) {
		t.Errorf("peerlink verify with UDP blocked: %v, want all 6 paths failed", err)
	}
	unblockUDP(t)
	checkHealthy(t, ctx, l, a, b)

	// The peer's gateway stopped.
	scaleController(t, ctx, l, b, 0)
	gw := gatewayDeployment(t, ctx, b, a)
	kubectlOut(t, ctx, l, b, "-n", gw.Namespace, "scale", "deployment", gw.Name, "--replicas=0")
	waitDiagnosis(t, ctx, l, a, b, "tunnel", "the peer's gateway is stopped")
	kubectlOut(t, ctx, l, b, "-n", gw.Namespace, "scale", "deployment", gw.Name, "--replicas=1")
	scaleController(t, ctx, l, b, 1)
	checkHealthy(t, ctx, l, a, b)
}

// diagnose runs peerlink diagnose on a with b as the remote cluster and
// returns what it found (-o json) and its error.
func diagnose(t *testing.T, ctx context.Context, l *labctl.Lab, a, b *cluster.Cluster) (*peering.Diagnosis, error) {
	t.Helper()
	out, err := l.Peerlink(ctx, "diagnose", "--kubeconfig", a.Kubeconfig(), "--remote-kubeconfig", b.Kubeconfig(), "-o", "json")
	d := &peering.Diagnosis{}
	if jerr := json.Unmarshal(out, d); jerr != nil {
		t.Fatalf("peerlink diagnose printed no diagnosis (%v): %v\n%s", jerr, err, out)
	}
	return d, err
}

// checkHealthy waits until diagnose, run on a with b as the remote
// cluster, finds nothing to fix.
func checkHealthy(t *testing.T, ctx context.Context, l *labctl.Lab, a, b *cluster.Cluster) {
	t.Helper()
	start := time.Now()
	eventually(t, ctx, "peerlink diagnose finds the peering healthy", func() error {
		d, err := diagnose(t, ctx, l, a, b)
		if err != nil || d.Failed() > 0 {
			return fmt.Errorf("%v: %s", err, failedFindings(d))
		}
		return nil
	})
	t.Logf("healthy: peerlink diagnose passes (%.1fs)", time.Since(start).Seconds())
}

// waitDiagnosis waits until diagnose, run on a with b as the remote
// cluster, fails exactly one check, check, with a message that says want,
// and exits with an error.
func waitDiagnosis(t *testing.T, ctx context.Context, l *labctl.Lab, a, b *cluster.Cluster, check, want string) {
	t.Helper()
	start := time.Now()
	var found peering.Finding
	eventually(t, ctx, fmt.Sprintf("peerlink diagnose fails check %q saying %q", check, want), func() error {
		d, err := diagnose(t, ctx, l, a, b)
		failed := slices.DeleteFunc(slices.Clone(d.Findings), func(f peering.Finding) bool { return f.OK })
		if err == nil || len(failed) != 1 || failed[0].Check != check || !strings.Contains(failed[0].Message, want) {
			return fmt.Errorf("exit %v, failed: %s", err, failedFindings(d))
		}
		found = failed[0]
		return nil
	})
	t.Logf("%s after %.1fs: %s", check, time.Since(start).Seconds(), found.Message)
}

// failedFindings lists the failed findings of d.
func failedFindings(d *peering.Diagnosis) string {
	var out []string
	for _, f := range d.Findings {
		if !f.OK {
			out = append(out, fmt.Sprintf("[%s %s] %s", f.Peer, f.Check, f.Message))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// failedFrom reports whether every path verify took from cluster id failed,
// and there was one.
func failedFrom(v *peering.Verification, id string) bool {
	n := 0
	for _, p := range v.Paths {
		if p.From == id {
			if p.OK {
				return false
			}
			n++
		}
	}
	return n > 0
}

// blockUDP makes the host drop every UDP packet between the node networks
// of a and b, both ways, until unblockUDP or the end of the test.
func blockUDP(t *testing.T, a, b *cluster.Cluster) {
	t.Helper()
	rules := fmt.Sprintf(`table inet %s {
	chain forward {
		type filter hook forward priority -10; policy accept;
		ip saddr %s ip daddr %s meta l4proto udp drop
		ip saddr %s ip daddr %s meta l4proto udp drop
	}
}
`, udpTable, a.NodeNetwork(), b.NodeNetwork(), b.NodeNetwork(), a.NodeNetwork())
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("block UDP: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("nft", "delete", "table", "inet", udpTable).Run() })
}

// unblockUDP takes blockUDP's table away.
func unblockUDP(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("nft", "delete", "table", "inet", udpTable).CombinedOutput(); err != nil {
		t.Fatalf("unblock UDP: %v: %s", err, out)
	}
}
