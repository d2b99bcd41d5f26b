package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/mcs"
)

// TestServices exports the echo Service of B and C (identical pod ranges,
// all three clusters) with the Multi-Cluster Services API and calls it by
// its clusterset name from A, through the tunnels: no cluster reads
// another's API server.
func TestServices(t *testing.T) {
	alone(t)
	ctx, l := newPeeredLabWith(t, 20*time.Minute, labctl.Options{Names: []string{"svc-a", "svc-b", "svc-c"}})
	a, b, c := l.Clusters[0], l.Clusters[1], l.Clusters[2]
	ns := labctl.EchoNamespace
	url := fmt.Sprintf("http://echo.%s.svc.%s:%d/", ns, cluster.ClustersetDomain, labctl.EchoPort)
	podsA := echoPods(t, ctx, l, a)

	// A namespace that did not opt in gets nothing.
	export(t, ctx, l, b, ns, "echo")
	time.Sleep(3 * time.Second)
	if out := kubectlOut(t, ctx, l, a, "get", "serviceimports", "-n", ns, "-o", "name"); out != "" {
		t.Fatalf("%s imported into a namespace that did not opt in: %s", a.Name, out)
	}
	kubectlOut(t, ctx, l, a, "label", "namespace", ns, mcs.ImportNamespaceLabel+"=true")

	// B's echo answers A's call by name, and sees A's pod remapped.
	podsB := echoPods(t, ctx, l, b)
	eventually(t, ctx, a.Name+" calls "+url+" and B answers", func() error {
		got, err := l.EchoGet(ctx, a, podsA[0].Name, url)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(podsB, func(p corev1.Pod) bool { return p.Name == got.Reply.Pod }) {
			return fmt.Errorf("answered by %s, not an echo pod of %s", got.Reply.Pod, b.Name)
		}
		want, err := l.RemappedIP(ctx, b, a, podsA[0].Status.PodIP)
		if err != nil {
			return err
		}
		if host, _, _ := strings.Cut(got.Reply.Client, ":"); host != want.String() {
			return fmt.Errorf("%s saw the caller as %s, want %s (A's pod remapped)", b.Name, got.Reply.Client, want)
		}
		t.Logf("%s -> %s: answered by %s, caller seen as %s", a.Name, url, got.Reply.Pod, got.Reply.Client)
		return nil
	})

	// With C exporting too (with the CLI), A's calls reach both.
	peerlink(t, ctx, l, "export", "service", ns+"/echo", "--wait", "--kubeconfig", c.Kubeconfig())
	podsC := echoPods(t, ctx, l, c)
	eventually(t, ctx, a.Name+"'s calls reach both exporting clusters", func() error {
		seen := map[string]bool{}
		for range 20 {
			got, err := l.EchoGet(ctx, a, podsA[0].Name, url)
			if err != nil {
				return err
			}
			switch {
			case slices.ContainsFunc(podsB, func(p corev1.Pod) bool { return p.Name == got.Reply.Pod }):
				seen[b.Name] = true
			case slices.ContainsFunc(podsC, func(p corev1.Pod) bool { return p.Name == got.Reply.Pod }):
				seen[c.Name] = true
			}
			if len(seen) == 2 {
				return nil
			}
		}
		return fmt.Errorf("20 calls reached only %v", seen)
	})

	// A's view of its peer: the service B exports.
	eventually(t, ctx, "peerlink info peer lists what "+b.Name+" exports", func() error {
		info := string(peerlink(t, ctx, l, "info", "peer", b.ClusterID, "--kubeconfig", a.Kubeconfig()))
		if !strings.Contains(info, ns+"/echo") {
			return fmt.Errorf("no %s/echo in:\n%s", ns, info)
		}
		return nil
	})

	// Scaling B is reflected in A within 2 s of B's own EndpointSlices.
	kubectlOut(t, ctx, l, b, "-n", ns, "scale", "deployment/"+labctl.EchoDeployment, "--replicas=3")
	var readyInB time.Time
	waitFor(t, ctx, 2*time.Minute, b.Name+" has 3 ready echo endpoints", func() error {
		n := readyEndpoints(t, ctx, b, ns, discoveryv1.LabelServiceName+"=echo")
		if n != 3 {
			return fmt.Errorf("%d ready", n)
		}
		readyInB = time.Now()
		return nil
	})
	waitFor(t, ctx, time.Minute, a.Name+" imports 3 ready endpoints of "+b.Name, func() error {
		n := readyEndpoints(t, ctx, a, ns, mcsv1beta1.LabelServiceName+"=echo,"+mcsv1beta1.LabelSourceCluster+"="+b.ClusterID)
		if n != 3 {
			return fmt.Errorf("%d ready", n)
		}
		return nil
	})
	lag := time.Since(readyInB)
	t.Logf("scaling %s reached %s's EndpointSlices %.2fs after %s's own", b.Name, a.Name, lag.Seconds(), b.Name)
	if lag > 2*time.Second {
		t.Errorf("scaling took %.2fs to reach %s, want at most 2 s", lag.Seconds(), a.Name)
	}

	// A headless export resolves per endpoint.
	echoService(t, ctx, l, b, ns, "echo-headless", corev1.ClusterIPNone)
	export(t, ctx, l, b, ns, "echo-headless")
	eventually(t, ctx, a.Name+" reaches a pod of "+b.Name+" by its clusterset per-endpoint name", func() error {
		out := kubectlOut(t, ctx, l, a, "get", "endpointslices", "-n", ns, "-l",
			mcsv1beta1.LabelServiceName+"=echo-headless", "-o", "jsonpath={.items[*].endpoints[*].addresses[0]}")
		addrs := strings.Fields(out)
		if len(addrs) == 0 {
			return fmt.Errorf("no imported endpoints of echo-headless")
		}
		ip, err := netip.ParseAddr(addrs[0])
		if err != nil {
			return err
		}
		name := fmt.Sprintf("http://%s.%s.echo-headless.%s.svc.%s:%d/", strings.ReplaceAll(ip.String(), ".", "-"),
			b.ClusterID, ns, cluster.ClustersetDomain, labctl.EchoPort)
		got, err := l.EchoGet(ctx, a, podsA[0].Name, name)
		if err != nil {
			return err
		}
		t.Logf("%s -> %s: answered by %s", a.Name, name, got.Reply.Pod)
		return nil
	})

	// Unexporting removes A's import within 5 s.
	kubectlOut(t, ctx, l, b, "delete", "serviceexport", "-n", ns, "echo")
	peerlink(t, ctx, l, "unexport", "service", ns+"/echo", "--kubeconfig", c.Kubeconfig())
	start := time.Now()
	waitFor(t, ctx, time.Minute, a.Name+" drops the import of echo", func() error {
		if out := kubectlOut(t, ctx, l, a, "get", "serviceimport", "-n", ns, "echo", "-o", "name", "--ignore-not-found"); out != "" {
			return fmt.Errorf("still there: %s", out)
		}
		return nil
	})
	t.Logf("unexport reached %s in %.2fs", a.Name, time.Since(start).Seconds())
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("unexport took %.2fs to reach %s, want at most 5 s", d.Seconds(), a.Name)
	}

	checkLargeExport(t, ctx, l, a, c)
}

// Figures of the large export of TestServices.
const (
	// largeExportBytes is the least JSON the large set must take on the
	// exchange: more than a ConfigMap holds (1 MiB).
	largeExportBytes = 1 << 20
	// endpointChangeWithin bounds the median time an endpoint change in the
	// large set takes to reach the importer's EndpointSlices.
	endpointChangeWithin = time.Second
	// endpointChanges is how many changes the median is taken of.
	endpointChanges = 5
)

// largeSet is the large export set: 190 Services of 100 endpoints each,
// with hostnames, as StatefulSets' pods have: 19,000 endpoints, within the
// default limit of a peer's endpoints (20,000), and over 1 MiB of JSON.
var largeSet = labctl.LargeSet{Namespace: "large", Services: 190, Endpoints: 100, Hostnames: true}

// checkLargeExport exports largeSet from exporter to importer, which must
// import every service with every endpoint ready, the set taking more than
// largeExportBytes of JSON on the exchange; then an endpoint of one service
// turns not ready and ready again in the exporter, endpointChanges times,
// and the median time each change takes to reach the importer's
// EndpointSlices must be within endpointChangeWithin.
func checkLargeExport(t *testing.T, ctx context.Context, l *labctl.Lab, importer, exporter *cluster.Cluster) {
	t.Helper()
	for _, n := range []*cluster.Cluster{importer, exporter} {
		kubectlOut(t, ctx, l, n, "create", "namespace", largeSet.Namespace)
	}
	kubectlOut(t, ctx, l, importer, "label", "namespace", largeSet.Namespace, mcs.ImportNamespaceLabel+"=true")
	ce, err := l.Client(exporter)
	if err != nil {
		t.Fatal(err)
	}
	if err := largeSet.Create(ctx, ce, exporter.PodCIDR, 8); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := largeSet.Export(ctx, ce); err != nil {
		t.Fatal(err)
	}
	total := largeSet.Services * largeSet.Endpoints
	from := mcsv1beta1.LabelSourceCluster + "=" + exporter.ClusterID
	waitFor(t, ctx, 3*time.Minute, fmt.Sprintf("%s imports the %d endpoints of %s's large set", importer.Name, total, exporter.Name), func() error {
		if n := readyEndpoints(t, ctx, importer, largeSet.Namespace, from); n != total {
			return fmt.Errorf("%d ready", n)
		}
		return nil
	})
	took := time.Since(start)
	stored, err := importsStored(ctx, l, importer, exporter.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	size, services := 0, 0
	for k, svc := range stored {
		if k.Namespace != largeSet.Namespace {
			continue
		}
		// What crossed the exchange: the service as the peer sent it,
		// without this side's first sight of it.
		svc.Seen = time.Time{}
		b, err := json.Marshal(&svc)
		if err != nil {
			t.Fatal(err)
		}
		size += len(b)
		services++
	}
	shards := storedShards(t, ctx, l, importer, exporter.ClusterID)
	t.Logf("%d services of %d endpoints, %d bytes of JSON on the exchange, imported with every endpoint ready in %.1fs, stored in %d shards",
		services, largeSet.Endpoints, size, took.Seconds(), len(shards))
	if services != largeSet.Services || size <= largeExportBytes {
		t.Errorf("the large set took %d bytes of JSON in %d services, want more than %d in %d", size, services, largeExportBytes, largeSet.Services)
	}
	if len(shards) < 2 {
		t.Errorf("%s stores %s's large set in %d shard, want several", importer.Name, exporter.Name, len(shards))
	}

	// One endpoint of the first service turns not ready, then ready again.
	ci, err := l.Client(importer)
	if err != nil {
		t.Fatal(err)
	}
	lags, err := largeSet.EndpointChanges(ctx, ce, ci, exporter.ClusterID, 0, endpointChanges)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lags)
	median := lags[len(lags)/2]
	t.Logf("an endpoint change in the large set reached %s in %.2fs (median of %v)", importer.Name, median, lags)
	if median > endpointChangeWithin.Seconds() {
		t.Errorf("an endpoint change in the large set took %.2fs (median) to reach %s, want at most %v", median, importer.Name, endpointChangeWithin)
	}
}

// export applies a ServiceExport of namespace/name in cluster n.
func export(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, namespace, name string) {
	t.Helper()
	applyManifest(t, ctx, l, n, fmt.Sprintf(`apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceExport
metadata:
  name: %s
  namespace: %s
`, name, namespace))
}

// echoService applies a Service for the echo pods of cluster n; clusterIP
// "None" makes it headless, "" lets the cluster allocate one.
func echoService(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, namespace, name, clusterIP string) {
	t.Helper()
	spec := ""
	if clusterIP != "" {
		spec = fmt.Sprintf("\n  clusterIP: %s", clusterIP)
	}
	applyManifest(t, ctx, l, n, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
spec:%s
  selector:
    app: %s
  ports:
  - name: http
    port: %d
`, name, namespace, spec, labctl.EchoDeployment, labctl.EchoPort))
}

func applyManifest(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, manifest string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectlOut(t, ctx, l, n, "apply", "-f", path)
}

func kubectlOut(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, args ...string) string {
	t.Helper()
	out, err := l.Kubectl(ctx, n, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// readyEndpoints counts the ready endpoints of the EndpointSlices of
// namespace that match selector.
func readyEndpoints(t *testing.T, ctx context.Context, n *cluster.Cluster, namespace, selector string) int {
	t.Helper()
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				count++
			}
		}
	}
	return count
}
