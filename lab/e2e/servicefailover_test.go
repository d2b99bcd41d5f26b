package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/bundles"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/echoapi"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/peering"
)

// Figures of TestServiceFailover.
const (
	// maxWithdrawal bounds the time from a peer's gateway stopping to its
	// endpoints leaving this cluster's import.
	maxWithdrawal = 5 * time.Second
	// sfWatch is how long the calls are watched in each state.
	sfWatch = 5 * time.Second
	// sfSync is the time kube-proxy takes to follow an EndpointSlice
	// (it syncs at most once a second after a burst).
	sfSync = 2 * time.Second
)

// TestServiceFailover exports Service web from both clusters of a peering
// and calls it by its clusterset name from a pod of the first, every
// 100 ms. With this cluster's endpoints ready, every call stays here (local
// first). With the preference off (the ServiceExport's annotation), calls
// reach both clusters. Then the peer's gateway stops (its controller
// stopped first, so that nothing starts it again): the peer's endpoints
// must leave the import within maxWithdrawal and the local ones keep
// answering every call; when the gateway runs again, the peer's endpoints
// come back and take calls again. Last, every metric the dashboard of
// bundles/monitoring queries must be in a scrape of the first cluster's
// controller, fabric agent and gateway.
func TestServiceFailover(t *testing.T) {
	alone(t)
	ctx, l := newPeeredLab(t, 15*time.Minute, "sf-a", "sf-b")
	a, b := l.Clusters[0], l.Clusters[1]
	const name = "web"
	ns := labctl.EchoNamespace
	for _, n := range []*cluster.Cluster{a, b} {
		kubectlOut(t, ctx, l, n, "label", "--overwrite", "namespace", ns, mcs.ImportNamespaceLabel+"=true")
		echoService(t, ctx, l, n, ns, name, "")
		export(t, ctx, l, n, ns, name)
	}
	podsA, podsB := echoPods(t, ctx, l, a), echoPods(t, ctx, l, b)
	in := func(pods []corev1.Pod) func(echoapi.Probe) bool {
		return func(p echoapi.Probe) bool {
			return p.OK && slices.ContainsFunc(pods, func(q corev1.Pod) bool { return q.Name == p.Reply.Pod })
		}
	}
	fromA, fromB := in(podsA), in(podsB)
	// peerSlices selects, in a's namespace, the imported EndpointSlices of
	// web that b's export makes.
	peerSlices := fmt.Sprintf("%s=%s,%s=%s", mcsv1beta1.LabelServiceName, name, mcsv1beta1.LabelSourceCluster, b.ClusterID)

	const probe = "sf-probe"
	url := fmt.Sprintf("http://%s.%s.svc.%s:%d/", name, ns, cluster.ClustersetDomain, labctl.EchoPort)
	if err := l.StartProbe(ctx, a, probe, url, 100*time.Millisecond, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	// calls returns the calls sent since then.
	calls := func(since time.Time) ([]echoapi.Probe, error) {
		res, err := l.ProbeResults(ctx, a, probe)
		return slices.DeleteFunc(res, func(p echoapi.Probe) bool { return p.UnixMilli < since.UnixMilli() }), err
	}
	// watch returns the calls of the next d.
	watch := func(d time.Duration) []echoapi.Probe {
		t.Helper()
		start := time.Now()
		time.Sleep(d)
		res, err := calls(start)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// Local first: both clusters export, a's endpoints are ready, b's are
	// in the import but stand by.
	eventually(t, ctx, "both clusters in the import of "+name+" in "+a.ClusterID, func() error {
		out, err := l.Kubectl(ctx, a, "-n", ns, "get", "serviceimport", name, "-o", "jsonpath={.status.clusters[*].cluster}")
		if err != nil {
			return err
		}
		if got := strings.Fields(string(out)); len(got) != 2 {
			return fmt.Errorf("clusters %v", got)
		}
		return nil
	})
	eventually(t, ctx, "calls answered by "+a.ClusterID+"'s pods", func() error {
		res, err := calls(time.Now().Add(-2 * time.Second))
		if err != nil {
			return err
		}
		if len(res) == 0 || !allOf(res, fromA) {
			return fmt.Errorf("last 2 s: %s", summary(res, fromA, fromB))
		}
		return nil
	})
	if res := watch(sfWatch); !allOf(res, fromA) {
		t.Errorf("local first: %s, want every call answered by %s's pods", summary(res, fromA, fromB), a.ClusterID)
	} else {
		t.Logf("local first: %s", summary(res, fromA, fromB))
	}
	// A healthy peering: peerlink verify finds every path of both
	// directions.
	if v, err := verify(t, ctx, l, a, b); err != nil || v.Failed() > 0 || len(v.Paths) != 6 {
		t.Errorf("peerlink verify on a healthy peering: %v; paths %+v, want 6 ok", err, v.Paths)
	}

	// The preference off: calls reach both clusters.
	kubectlOut(t, ctx, l, a, "-n", ns, "annotate", "--overwrite", "serviceexport", name, mcs.PreferLocalAnnotation+"=false")
	eventually(t, ctx, "calls answered by both clusters, the preference off", func() error {
		res, err := calls(time.Now().Add(-3 * time.Second))
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(res, fromA) || !slices.ContainsFunc(res, fromB) {
			return fmt.Errorf("last 3 s: %s", summary(res, fromA, fromB))
		}
		return nil
	})

	// b's gateway stops, and nothing starts it again.
	scaleController(t, ctx, l, b, 0)
	gw := gatewayDeployment(t, ctx, b, a)
	kubectlOut(t, ctx, l, b, "-n", gw.Namespace, "scale", "deployment", gw.Name, "--replicas=0")
	stopped := time.Now()
	var withdrawn time.Duration
	waitFor(t, ctx, time.Minute, b.ClusterID+"'s endpoints leave the import in "+a.ClusterID, func() error {
		if n := readyEndpoints(t, ctx, a, ns, peerSlices); n > 0 {
			return fmt.Errorf("%d ready", n)
		}
		withdrawn = time.Since(stopped)
		return nil
	})
	lost, err := calls(stopped)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s's gateway stopped: its endpoints left the import after %.2fs; meanwhile %s", b.ClusterID, withdrawn.Seconds(), summary(lost, fromA, fromB))
	if withdrawn > maxWithdrawal {
		t.Errorf("%s's endpoints left the import %.2fs after its gateway stopped, want at most %v", b.ClusterID, withdrawn.Seconds(), maxWithdrawal)
	}
	time.Sleep(sfSync)
	if res := watch(sfWatch); len(res) == 0 || !allOf(res, fromA) {
		t.Errorf("%s's gateway stopped: %s, want every call answered by %s's pods", b.ClusterID, summary(res, fromA, fromB), a.ClusterID)
	} else {
		t.Logf("%s's gateway stopped: %s", b.ClusterID, summary(res, fromA, fromB))
	}
	// peerlink verify fails, and names every path as failed.
	v, err := verify(t, ctx, l, a, b, "--attempts=3", "--timeout=60s")
	if err == nil || len(v.Paths) != 6 || v.Failed() != len(v.Paths) {
		t.Errorf("peerlink verify with %s's gateway stopped: %v; paths %+v, want all 6 failed", b.ClusterID, err, v.Paths)
	} else if !strings.Contains(err.Error(), "6 of 6 paths failed") {
		t.Errorf("peerlink verify with %s's gateway stopped: %v, want it to say 6 of 6 paths failed", b.ClusterID, err)
	}

	// b's gateway runs again: its endpoints come back and take calls.
	kubectlOut(t, ctx, l, b, "-n", gw.Namespace, "scale", "deployment", gw.Name, "--replicas=1")
	back := time.Now()
	scaleController(t, ctx, l, b, 1)
	eventually(t, ctx, b.ClusterID+"'s endpoints back in the import in "+a.ClusterID, func() error {
		if n := readyEndpoints(t, ctx, a, ns, peerSlices); n == 0 {
			return fmt.Errorf("none ready")
		}
		return nil
	})
	t.Logf("%s's gateway started again: its endpoints ready in the import after %.2fs", b.ClusterID, time.Since(back).Seconds())
	eventually(t, ctx, "calls answered by "+b.ClusterID+"'s pods again", func() error {
		res, err := calls(time.Now().Add(-3 * time.Second))
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(res, fromB) {
			return fmt.Errorf("last 3 s: %s", summary(res, fromA, fromB))
		}
		return nil
	})

	// The dashboard of bundles/monitoring queries nothing a real scrape
	// of a's controller, fabric agent and gateway lacks.
	checkDashboardMetrics(t, ctx, l, a, b)

}

// allOf tells whether every call is answered and matches.
func allOf(res []echoapi.Probe, match func(echoapi.Probe) bool) bool {
	for _, p := range res {
		if !match(p) {
			return false
		}
	}
	return true
}

// summary counts calls by who answered: a's pods, b's pods, nobody.
func summary(res []echoapi.Probe, fromA, fromB func(echoapi.Probe) bool) string {
	var na, nb, failed int
	var why string
	for _, p := range res {
		switch {
		case fromA(p):
			na++
		case fromB(p):
			nb++
		default:
			failed++
			why = p.Error
		}
	}
	s := fmt.Sprintf("%d calls: %d answered here, %d by the peer, %d not", len(res), na, nb, failed)
	if why != "" {
		s += " (last: " + why + ")"
	}
	return s
}

// gatewayDeployment returns the Deployment of the gateway of cluster n for
// peer.
func gatewayDeployment(t *testing.T, ctx context.Context, n, peer *cluster.Cluster) metav1.ObjectMeta {
	t.Helper()
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: netv1beta1.RemoteClusterIDLabel + "=" + peer.ClusterID})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list.Items {
		if strings.HasPrefix(d.Name, netv1beta1.GatewayObjectPrefix) {
			return d.ObjectMeta
		}
	}
	t.Fatalf("%s: no gateway Deployment for %s", n.ClusterID, peer.ClusterID)
	return metav1.ObjectMeta{}
}

// checkDashboardMetrics scrapes the controller, the fabric agent and the
// gateway for peer of cluster n and fails for each metric the dashboard of
// bundles/monitoring queries that none of them exposes.
func checkDashboardMetrics(t *testing.T, ctx context.Context, l *labctl.Lab, n, peer *cluster.Cluster) {
	t.Helper()
	want, err := bundles.DashboardMetrics()
	if err != nil {
		t.Fatal(err)
	}
	targets := []struct{ ns, selector string }{
		{labctl.PeerlinkNamespace, labctl.ControllerSelector},
		{labctl.PeerlinkNamespace, "app.kubernetes.io/name=peerlink-fabric"},
		{manifests.TenantNamespace(peer.ClusterID), netv1beta1.ActiveGatewayLabel + "=true"},
	}
	ports := []int{labctl.ControllerMetricsPort, labctl.FabricMetricsPort, labctl.GatewayMetricsPort}
	// Some metrics appear once there is something to say (the last
	// handshake, after the tunnel's first since the peer's gateway came
	// back): the scrapes are repeated until every one is there.
	eventually(t, ctx, "every metric the dashboard queries in the scrapes of "+n.ClusterID, func() error {
		have := map[string]bool{}
		for i, tg := range targets {
			pod, err := l.Kubectl(ctx, n, "-n", tg.ns, "get", "pods", "-l", tg.selector, "-o", "jsonpath={.items[0].metadata.name}")
			if err != nil {
				return err
			}
			out, err := l.Kubectl(ctx, n, "get", "--raw", labctl.MetricsPath(tg.ns, strings.TrimSpace(string(pod)), ports[i]))
			if err != nil {
				return fmt.Errorf("scrape %s/%s: %w", tg.ns, pod, err)
			}
			for series := range labctl.ParseMetrics(out) {
				name, _, _ := strings.Cut(series, "{")
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					name = strings.TrimSuffix(name, suffix)
				}
				have[name] = true
			}
		}
		var missing []string
		for _, m := range want {
			if !have[m] {
				missing = append(missing, m)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the dashboard queries %v, which no scrape of the controller, fabric and gateway has", missing)
		}
		return nil
	})
	t.Logf("the dashboard's %d metrics are all in the scrapes of %s's controller, fabric and gateway", len(want), n.ClusterID)
}

// verify runs peerlink verify from a with b as the remote cluster, and
// returns what it printed (-o json) and its error, which says how many
// paths failed.
func verify(t *testing.T, ctx context.Context, l *labctl.Lab, a, b *cluster.Cluster, flags ...string) (*peering.Verification, error) {
	t.Helper()
	args := append([]string{"verify", "--kubeconfig", a.Kubeconfig(), "--remote-kubeconfig", b.Kubeconfig(), "-o", "json"}, flags...)
	out, err := l.Peerlink(ctx, args...)
	v := &peering.Verification{}
	if jerr := json.Unmarshal(out, v); jerr != nil {
		t.Fatalf("peerlink verify printed no verification (%v): %v\n%s", jerr, err, out)
	}
	for _, p := range v.Paths {
		t.Logf("verify: %s -> %s, %s: ok %v, %s%s", p.From, p.To, p.Path, p.OK, p.AnsweredBy, p.Error)
	}
	return v, err
}
