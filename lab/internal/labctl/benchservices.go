package labctl

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/lab/figures"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/mcs"
)

const (
	// exportTrials is how many exports the answer time is measured on.
	exportTrials = 5
	// exportWorkers is how many ServiceExports of a large set are created
	// at once.
	exportWorkers = 8
	// answerProbeInterval is the resolution of the export-to-answer
	// figures.
	answerProbeInterval = 50 * time.Millisecond
)

// benchSet is the large export set of the bench.
var benchSet = LargeSet{Namespace: "bench-mcs", Services: 1000, Endpoints: 10}

// BenchServices measures the Multi-Cluster Services path from b (the
// exporter) to a (the importer), which must be peered.
func (l *Lab) BenchServices(ctx context.Context, a, b *cluster.Cluster) (figures.Services, error) {
	f := figures.Services{Services: benchSet.Services, Endpoints: benchSet.Endpoints, Memory: map[string]float64{}}
	if _, err := l.Kubectl(ctx, a, "label", "namespace", EchoNamespace, mcs.ImportNamespaceLabel+"=true", "--overwrite"); err != nil {
		return f, err
	}
	cb, err := l.Client(b)
	if err != nil {
		return f, err
	}
	for i := range exportTrials {
		name := fmt.Sprintf("bench-export-%d", i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: EchoNamespace, Name: name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": EchoDeployment},
				Ports: []corev1.ServicePort{{Name: "http", Port: EchoPort}}},
		}
		if err := cb.Create(ctx, svc); err != nil {
			return f, fmt.Errorf("cluster %s: create service %s: %w", b.Name, name, err)
		}
		// The Service's own endpoints first: what is measured is the
		// export, not the endpoint controller.
		if err := waitReadyEndpoints(ctx, cb, EchoNamespace, discoveryv1.LabelServiceName+"="+name); err != nil {
			return f, err
		}
		// A probe pod in a asks for the name every answerProbeInterval,
		// each request on its own, from before the export on: the first
		// answered request tells when the name resolved and answered,
		// without a request that went out too early (to a clusterset IP
		// kube-proxy has not programmed yet) holding back the next.
		url := fmt.Sprintf("http://%s.%s.svc.%s:%d/", name, EchoNamespace, cluster.ClustersetDomain, EchoPort)
		probe := name + "-probe"
		if err := l.StartProbe(ctx, a, probe, url, answerProbeInterval, time.Minute); err != nil {
			return f, err
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			res, err := l.ProbeResults(ctx, a, probe)
			return err == nil && len(res) > 0, nil
		}); err != nil {
			return f, fmt.Errorf("cluster %s: probe %s never ran: %w", a.Name, probe, err)
		}
		hops, err := l.traceHops(ctx, a, b, EchoNamespace, name)
		if err != nil {
			return f, err
		}
		start := time.Now()
		if err := cb.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: EchoNamespace, Name: name}}); err != nil {
			return f, fmt.Errorf("cluster %s: create serviceexport %s: %w", b.Name, name, err)
		}
		var took time.Duration
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			res, err := l.ProbeResults(ctx, a, probe)
			if err != nil {
				return false, nil
			}
			for _, p := range res {
				if sent := time.UnixMilli(p.UnixMilli); p.OK && !sent.Before(start) && (took == 0 || sent.Sub(start) < took) {
					took = sent.Sub(start)
				}
			}
			return took > 0, nil
		})
		if err != nil {
			return f, fmt.Errorf("cluster %s: %s never answered: %w", a.Name, url, err)
		}
		f.ExportToAnswerSeconds = append(f.ExportToAnswerSeconds, took.Seconds())
		l.progress.Logf("%s: %s, answer %.2fs", name, hops.done(start), took.Seconds())
	}
	sorted := slices.Sorted(slices.Values(f.ExportToAnswerSeconds))
	f.MedianExportToAnswer = sorted[len(sorted)/2]
	l.progress.Logf("ServiceExport -> answer by name in the peer: median %.2fs of %v", f.MedianExportToAnswer, f.ExportToAnswerSeconds)

	// The large set: selector-less Services with hand-made EndpointSlices
	// of addresses in b's pod range, exported in one go.
	for _, n := range []*cluster.Cluster{a, b} {
		if _, err := l.Kubectl(ctx, n, "create", "namespace", benchSet.Namespace); err != nil {
			return f, err
		}
	}
	if _, err := l.Kubectl(ctx, a, "label", "namespace", benchSet.Namespace, mcs.ImportNamespaceLabel+"=true"); err != nil {
		return f, err
	}
	made := time.Now()
	if err := benchSet.Create(ctx, cb, b.PodCIDR); err != nil {
		return f, fmt.Errorf("cluster %s: %w", b.Name, err)
	}
	l.progress.Logf("%d Services and their EndpointSlices created in %s in %.1fs", benchSet.Services, b.Name, time.Since(made).Seconds())
	start := time.Now()
	if err := benchSet.Export(ctx, cb); err != nil {
		return f, fmt.Errorf("cluster %s: %w", b.Name, err)
	}
	l.progress.Logf("%d ServiceExports created in %s in %.1fs", benchSet.Services, b.Name, time.Since(start).Seconds())
	ca, err := l.Client(a)
	if err != nil {
		return f, err
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var sis mcsv1beta1.ServiceImportList
		if err := ca.List(ctx, &sis, client.InNamespace(benchSet.Namespace)); err != nil {
			return false, nil
		}
		return len(sis.Items) == benchSet.Services, nil
	})
	if err != nil {
		return f, fmt.Errorf("cluster %s: the %d services of %s not all imported: %w", a.Name, benchSet.Services, b.Name, err)
	}
	f.ImportSeconds = time.Since(start).Seconds()
	l.progress.Logf("%d exported services of %d endpoints: all imported in %.1fs", benchSet.Services, benchSet.Endpoints, f.ImportSeconds)
	for _, n := range []*cluster.Cluster{a, b} {
		for what, pod := range map[string]func() (string, string, int, error){
			"controller": func() (string, string, int, error) {
				return l.podOf(ctx, n, PeerlinkNamespace, ControllerSelector, ControllerMetricsPort)
			},
			"gateway": func() (string, string, int, error) {
				return l.podOf(ctx, n, "", netv1beta1.ActiveGatewayLabel, GatewayMetricsPort)
			},
		} {
			ns, name, port, err := pod()
			if err != nil {
				return f, err
			}
			rss, err := l.residentMemory(ctx, n, ns, name, port)
			if err != nil {
				return f, err
			}
			f.Memory[n.Name+" "+what] = rss
			l.progress.Logf("%s %s: %.0f MiB resident", n.Name, what, rss/(1<<20))
		}
	}
	return f, nil
}

// waitReadyEndpoints waits until the EndpointSlices matching selector hold
// a ready endpoint.
func waitReadyEndpoints(ctx context.Context, c client.Client, ns, selector string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var list discoveryv1.EndpointSliceList
		sel, err := metav1.ParseToLabelSelector(selector)
		if err != nil {
			return false, err
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return false, err
		}
		if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: s}); err != nil {
			return false, nil
		}
		for _, sl := range list.Items {
			for _, e := range sl.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					return true, nil
				}
			}
		}
		return false, nil
	})
}

// LargeSet is an export set of many Services with many endpoints each:
// selector-less Services with hand-made EndpointSlices at addresses of the
// exporter's pod range that no pod holds, so that its size costs no pods.
type LargeSet struct {
	// Namespace holds the set, on both sides.
	Namespace string
	// Services is the number of Services, Endpoints the endpoints of each
	// (in one EndpointSlice, so at most 1,000).
	Services, Endpoints int
	// Hostnames gives each endpoint a hostname, as a StatefulSet's pods
	// have.
	Hostnames bool
}

// Name is the name of Service i of the set.
func (s LargeSet) Name(i int) string { return fmt.Sprintf("svc-%04d", i) }

// Create creates the Services of the set and their EndpointSlices, every
// endpoint ready, not exported yet. The endpoints' addresses are counted
// from the 100th /24 of the first /16 of podCIDR, far above what nodes
// hand out.
func (s LargeSet) Create(ctx context.Context, c client.Client, podCIDR netip.Prefix) error {
	const first = 100 * 256
	if podCIDR.Bits() > 16 || first+s.Services*s.Endpoints > 1<<16 {
		return fmt.Errorf("%d endpoints do not fit in %s past its 200th /24", s.Services*s.Endpoints, podCIDR)
	}
	base := podCIDR.Masked().Addr().As4()
	ready, port, portName := true, int32(EchoPort), "http"
	for i := range s.Services {
		name := s.Name(i)
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: s.Namespace, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		}
		for j := range s.Endpoints {
			n := first + i*s.Endpoints + j
			ip := netip.AddrFrom4([4]byte{base[0], base[1], byte(n >> 8), byte(n)})
			ep := discoveryv1.Endpoint{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
			if s.Hostnames {
				ep.Hostname = ptr.To(fmt.Sprintf("ep-%05d", j))
			}
			slice.Endpoints = append(slice.Endpoints, ep)
		}
		for _, o := range []client.Object{
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: portName, Port: port}}}},
			slice,
		} {
			if err := c.Create(ctx, o); err != nil {
				return fmt.Errorf("create %T %s/%s: %w", o, s.Namespace, name, err)
			}
		}
	}
	return nil
}

// Export exports the Services of the set, from a few clients at once, as
// an apply of a directory of ServiceExports would.
func (s LargeSet) Export(ctx context.Context, c client.Client) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(exportWorkers)
	for i := range s.Services {
		g.Go(func() error {
			se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name(i)}}
			if err := c.Create(gctx, se); err != nil {
				return fmt.Errorf("create ServiceExport %s/%s: %w", s.Namespace, se.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// podOf returns the namespace and name of the one pod matching selector
// (in namespace, or any with ns empty), with the metrics port given.
func (l *Lab) podOf(ctx context.Context, n *cluster.Cluster, ns, selector string, port int) (string, string, int, error) {
	cs, err := n.Clientset()
	if err != nil {
		return "", "", 0, err
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return "", "", 0, err
	}
	if len(pods.Items) != 1 {
		return "", "", 0, fmt.Errorf("cluster %s: %d pods match %s", n.Name, len(pods.Items), selector)
	}
	return pods.Items[0].Namespace, pods.Items[0].Name, port, nil
}

// residentMemory reads process_resident_memory_bytes from a pod's metrics
// through the API server's proxy.
func (l *Lab) residentMemory(ctx context.Context, n *cluster.Cluster, ns, pod string, port int) (float64, error) {
	out, err := l.Kubectl(ctx, n, "get", "--raw", MetricsPath(ns, pod, port))
	if err != nil {
		return 0, err
	}
	if v, ok := ParseMetrics(out)["process_resident_memory_bytes"]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("cluster %s: pod %s/%s publishes no process_resident_memory_bytes", n.Name, ns, pod)
}
