package labctl

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/lab/figures"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/manifests"
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

// benchSet is the large export set of the bench: 100,000 endpoints.
var benchSet = LargeSet{Namespace: "bench-mcs", Services: 1000, Endpoints: 100}

// directWorkers is how many objects the bench writes at once, as many as
// the services controller writes imports at once (its parallelWrites).
const directWorkers = 32

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

	if err := l.benchLargeSet(ctx, a, b, &f); err != nil {
		return f, err
	}
	return f, nil
}

// benchLargeSet exports benchSet from b to a and measures it: the time to
// every service imported and every endpoint ready in a, beside the time
// a's API server takes to accept the same Services and EndpointSlices
// written directly; an endpoint change at that size; the bytes a's gateway
// received meanwhile, and the peak memory of both sides.
func (l *Lab) benchLargeSet(ctx context.Context, a, b *cluster.Cluster, f *figures.Services) error {
	// The set is past the default limits of a peer's endpoints and bytes.
	if err := l.raiseImportLimits(ctx, a, b); err != nil {
		return err
	}
	ca, err := l.Client(a)
	if err != nil {
		return err
	}
	cb, err := l.Client(b)
	if err != nil {
		return err
	}
	for _, n := range []*cluster.Cluster{a, b} {
		if _, err := l.Kubectl(ctx, n, "create", "namespace", benchSet.Namespace); err != nil {
			return err
		}
	}
	if _, err := l.Kubectl(ctx, a, "label", "namespace", benchSet.Namespace, mcs.ImportNamespaceLabel+"=true"); err != nil {
		return err
	}
	made := time.Now()
	if err := benchSet.Create(ctx, cb, b.PodCIDR, directWorkers); err != nil {
		return fmt.Errorf("cluster %s: %w", b.Name, err)
	}
	l.progress.Logf("%d Services and their EndpointSlices created in %s in %.1fs", benchSet.Services, b.Name, time.Since(made).Seconds())
	received := func() (float64, error) {
		ns, pod, port, err := l.podOf(ctx, a, "", netv1beta1.ActiveGatewayLabel, GatewayMetricsPort)
		if err != nil {
			return 0, err
		}
		out, err := l.Kubectl(ctx, a, "get", "--raw", MetricsPath(ns, pod, port))
		if err != nil {
			return 0, err
		}
		return ParseMetrics(out)["peerlink_gateway_received_bytes_total"], nil
	}
	sent, err := received()
	if err != nil {
		return err
	}
	peak := l.samplePeakMemory(ctx, a, b)
	start := time.Now()
	if err := benchSet.Export(ctx, cb); err != nil {
		return fmt.Errorf("cluster %s: %w", b.Name, err)
	}
	l.progress.Logf("%d ServiceExports created in %s in %.1fs", benchSet.Services, b.Name, time.Since(start).Seconds())
	total := benchSet.Services * benchSet.Endpoints
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if f.ImportSeconds == 0 {
			var sis mcsv1beta1.ServiceImportList
			if err := ca.List(ctx, &sis, client.InNamespace(benchSet.Namespace)); err != nil || len(sis.Items) < benchSet.Services {
				return false, nil
			}
			f.ImportSeconds = time.Since(start).Seconds()
		}
		n, err := benchSet.ReadyImported(ctx, ca, b.ClusterID)
		return err == nil && n == total, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: the %d endpoints of %s's %d services not all imported ready: %w", a.Name, total, b.Name, benchSet.Services, err)
	}
	f.ReadySeconds = time.Since(start).Seconds()
	f.Memory = peak()
	got, err := received()
	if err != nil {
		return err
	}
	f.TunnelBytes = got - sent
	l.progress.Logf("%d exported services of %d endpoints: all imported in %.1fs, every endpoint ready in %.1fs, %.1f MiB through the tunnel",
		benchSet.Services, benchSet.Endpoints, f.ImportSeconds, f.ReadySeconds, f.TunnelBytes/(1<<20))
	for k, v := range f.Memory {
		l.progress.Logf("%s: %.0f MiB resident at most", k, v/(1<<20))
	}

	reconciles := func() (map[string][2]float64, error) {
		out := map[string][2]float64{}
		for _, n := range []*cluster.Cluster{a, b} {
			ns, pod, port, err := l.podOf(ctx, n, PeerlinkNamespace, ControllerSelector, ControllerMetricsPort)
			if err != nil {
				return nil, err
			}
			raw, err := l.Kubectl(ctx, n, "get", "--raw", MetricsPath(ns, pod, port))
			if err != nil {
				return nil, err
			}
			m := ParseMetrics(raw)
			out[n.Name] = [2]float64{m[`controller_runtime_reconcile_time_seconds_sum{controller="services"}`],
				m[`controller_runtime_reconcile_time_seconds_count{controller="services"}`]}
		}
		return out, nil
	}
	before, err := reconciles()
	if err != nil {
		return err
	}
	lags, err := benchSet.EndpointChanges(ctx, cb, ca, b.ClusterID, 0, exportTrials)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", a.Name, err)
	}
	f.EndpointChangeSeconds = slices.Sorted(slices.Values(lags))[len(lags)/2]
	l.progress.Logf("an endpoint change at %d endpoints reached %s in %.2fs (median of %v)", total, a.Name, f.EndpointChangeSeconds, lags)
	after, err := reconciles()
	if err != nil {
		return err
	}
	f.ReconcileSeconds = map[string]float64{}
	for name, v := range after {
		if n := v[1] - before[name][1]; n > 0 {
			f.ReconcileSeconds[name] = (v[0] - before[name][0]) / n
			l.progress.Logf("%s: %.0f reconciles of the services controller meanwhile, %.0f ms each", name, n, 1000*f.ReconcileSeconds[name])
		}
	}
	if f.Restarts, err = l.restarts(ctx, a, b); err != nil {
		return err
	}
	for what, why := range f.Restarts {
		l.progress.Logf("%s restarted during the bench: %s", what, why)
	}

	// The physical limit of a's API server: the same objects, written
	// directly, as many at once as the controller writes.
	direct := LargeSet{Namespace: benchSet.Namespace + "-direct", Services: benchSet.Services, Endpoints: benchSet.Endpoints}
	if _, err := l.Kubectl(ctx, a, "create", "namespace", direct.Namespace); err != nil {
		return err
	}
	began := time.Now()
	if err := direct.Create(ctx, ca, a.PodCIDR, directWorkers); err != nil {
		return fmt.Errorf("cluster %s: %w", a.Name, err)
	}
	f.DirectSeconds, f.DirectWorkers = time.Since(began).Seconds(), directWorkers
	l.progress.Logf("the same %d Services and EndpointSlices written directly into %s, %d at once: %.1fs", direct.Services, a.Name, directWorkers, f.DirectSeconds)
	// And with the ServiceImport of each and its status: the four writes
	// an import is made of.
	direct.Namespace, direct.Imports = benchSet.Namespace+"-imports", true
	if _, err := l.Kubectl(ctx, a, "create", "namespace", direct.Namespace); err != nil {
		return err
	}
	began = time.Now()
	if err := direct.Create(ctx, ca, a.PodCIDR, directWorkers); err != nil {
		return fmt.Errorf("cluster %s: %w", a.Name, err)
	}
	f.DirectImportsSeconds = time.Since(began).Seconds()
	l.progress.Logf("the same with a ServiceImport and its status each, written directly into %s: %.1fs", a.Name, f.DirectImportsSeconds)
	// The direct writes go: 200,000 more endpoints would weigh on
	// kube-proxy and the CNI for the rest of the bench.
	began = time.Now()
	if _, err := l.Kubectl(ctx, a, "delete", "namespace", benchSet.Namespace+"-direct", direct.Namespace, "--timeout=5m"); err != nil {
		return err
	}
	l.progress.Logf("the directly written objects deleted from %s in %.1fs", a.Name, time.Since(began).Seconds())
	return nil
}

// restarts returns, by "<cluster> <controller|gateway>", the containers
// of the controller and of the gateway pods of a and b that restarted, and
// why they last ended.
func (l *Lab) restarts(ctx context.Context, a, b *cluster.Cluster) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range []*cluster.Cluster{a, b} {
		cs, err := n.Clientset()
		if err != nil {
			return nil, err
		}
		for what, sel := range map[string][2]string{
			"controller": {PeerlinkNamespace, ControllerSelector},
			"gateway":    {"", netv1beta1.GatewayNameLabel},
		} {
			pods, err := cs.CoreV1().Pods(sel[0]).List(ctx, metav1.ListOptions{LabelSelector: sel[1]})
			if err != nil {
				return nil, fmt.Errorf("cluster %s: list the %s pods: %w", n.Name, what, err)
			}
			var why []string
			for _, p := range pods.Items {
				for _, c := range p.Status.ContainerStatuses {
					if c.RestartCount == 0 {
						continue
					}
					reason := "unknown"
					if t := c.LastTerminationState.Terminated; t != nil {
						reason = fmt.Sprintf("%s, exit code %d", t.Reason, t.ExitCode)
					}
					why = append(why, fmt.Sprintf("%s/%s %d times, last %s", p.Name, c.Name, c.RestartCount, reason))
				}
			}
			if len(why) > 0 {
				out[n.Name+" "+what] = strings.Join(why, "; ")
			}
		}
	}
	return out, nil
}

// importLimits are the limits of what a peer may export that the bench's
// importing controller takes: its large set is past the defaults' total
// of endpoints (20,000) and of bytes (4 MiB).
var importLimits = []string{"--max-imported-endpoints=200000", "--max-imported-bytes=" + strconv.Itoa(32<<20)}

// raiseImportLimits gives a's controller importLimits, and waits for a's
// gateway of the peering with b to run with them and the peering to be
// Connected again.
func (l *Lab) raiseImportLimits(ctx context.Context, a, b *cluster.Cluster) error {
	var ops []string
	for _, arg := range importLimits {
		ops = append(ops, fmt.Sprintf(`{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":%q}`, arg))
	}
	if _, err := l.Kubectl(ctx, a, "-n", PeerlinkNamespace, "patch", "deployment/peerlink-controller", "--type=json",
		"-p", "["+strings.Join(ops, ",")+"]"); err != nil {
		return err
	}
	if err := l.waitRollout(ctx, a, PeerlinkNamespace, "deployment/peerlink-controller"); err != nil {
		return err
	}
	cs, err := a.Clientset()
	if err != nil {
		return err
	}
	tenant := manifests.TenantNamespace(b.ClusterID)
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{LabelSelector: netv1beta1.ActiveGatewayLabel + "=true"})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].DeletionTimestamp != nil {
			return false, nil
		}
		return slices.ContainsFunc(pods.Items[0].Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == netv1beta1.ServiceLimitsEnv }), nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: no active gateway pod in %s with %s: %w", a.Name, tenant, netv1beta1.ServiceLimitsEnv, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := l.WaitConnected(wctx, a, b); err != nil {
		return err
	}
	l.progress.Logf("%s: the controller and its gateway of %s run with %s", a.Name, b.Name, strings.Join(importLimits, " "))
	return nil
}

// samplePeakMemory samples, every second until the returned function is
// called, the resident memory of the controller and the active gateway
// pod of a and b, and returns the most each held, by "<cluster>
// <controller|gateway>".
func (l *Lab) samplePeakMemory(ctx context.Context, a, b *cluster.Cluster) func() map[string]float64 {
	var mu sync.Mutex
	peak := map[string]float64{}
	sample := func() {
		for _, n := range []*cluster.Cluster{a, b} {
			for what, selector := range map[string][2]string{
				"controller": {PeerlinkNamespace, ControllerSelector},
				"gateway":    {"", netv1beta1.ActiveGatewayLabel},
			} {
				port := ControllerMetricsPort
				if what == "gateway" {
					port = GatewayMetricsPort
				}
				ns, name, port, err := l.podOf(ctx, n, selector[0], selector[1], port)
				if err != nil {
					continue
				}
				rss, err := l.residentMemory(ctx, n, ns, name, port)
				if err != nil {
					continue
				}
				mu.Lock()
				peak[n.Name+" "+what] = max(peak[n.Name+" "+what], rss)
				mu.Unlock()
			}
		}
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sctx.Err() == nil {
			sample()
			select {
			case <-sctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return func() map[string]float64 {
		stop()
		<-done
		sample()
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(peak)
	}
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
	// Imports makes Create write, after each Service and EndpointSlice, a
	// ServiceImport with the Service's IP and its status, as an import is
	// made of: the writes of an import, without peerlink.
	Imports bool
}

// Name is the name of Service i of the set.
func (s LargeSet) Name(i int) string { return fmt.Sprintf("svc-%04d", i) }

// Create creates the Services of the set and their EndpointSlices, every
// endpoint ready, not exported yet, workers at a time. The endpoints'
// addresses are counted from the 100th /24 of the first /16 of podCIDR,
// far above what nodes hand out, and start again there past the /16 (the
// services of a large set share addresses, as Services of the same pods
// do).
func (s LargeSet) Create(ctx context.Context, c client.Client, podCIDR netip.Prefix, workers int) error {
	const first, span = 100 * 256, 1<<16 - 100*256
	if podCIDR.Bits() > 16 || s.Endpoints > span {
		return fmt.Errorf("%d endpoints of a service do not fit in %s past its 100th /24", s.Endpoints, podCIDR)
	}
	base := podCIDR.Masked().Addr().As4()
	ready, port, portName := true, int32(EchoPort), "http"
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range s.Services {
		name := s.Name(i)
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: s.Namespace, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		}
		for j := range s.Endpoints {
			n := first + (i*s.Endpoints+j)%span
			ip := netip.AddrFrom4([4]byte{base[0], base[1], byte(n >> 8), byte(n)})
			ep := discoveryv1.Endpoint{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
			if s.Hostnames {
				ep.Hostname = ptr.To(fmt.Sprintf("ep-%05d", j))
			}
			slice.Endpoints = append(slice.Endpoints, ep)
		}
		g.Go(func() error {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: portName, Port: port}}}}
			for _, o := range []client.Object{slice, svc} {
				if err := c.Create(gctx, o); err != nil {
					return fmt.Errorf("create %T %s/%s: %w", o, s.Namespace, name, err)
				}
			}
			if !s.Imports {
				return nil
			}
			si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name},
				Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: svc.Spec.ClusterIPs,
					Ports: []mcsv1beta1.ServicePort{{Name: portName, Protocol: corev1.ProtocolTCP, Port: port}}}}
			if err := c.Create(gctx, si); err != nil {
				return fmt.Errorf("create ServiceImport %s/%s: %w", s.Namespace, name, err)
			}
			si.Status.Clusters = []mcsv1beta1.ClusterStatus{{Cluster: "direct"}}
			if err := c.Status().Update(gctx, si); err != nil {
				return fmt.Errorf("update ServiceImport %s/%s status: %w", s.Namespace, name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// ReadyImported counts the ready endpoints c's cluster imports of the set
// from the cluster exporterID.
func (s LargeSet) ReadyImported(ctx context.Context, c client.Client, exporterID string, selector ...string) (int, error) {
	labels := client.MatchingLabels{mcsv1beta1.LabelSourceCluster: exporterID}
	if len(selector) > 0 {
		labels[mcsv1beta1.LabelServiceName] = selector[0]
	}
	var list discoveryv1.EndpointSliceList
	if err := c.List(ctx, &list, client.InNamespace(s.Namespace), labels); err != nil {
		return 0, err
	}
	n := 0
	for _, sl := range list.Items {
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n++
			}
		}
	}
	return n, nil
}

// EndpointChanges turns the first endpoint of service i of the set not
// ready in the exporter, then ready again, changes times, and returns how
// long each change took to show in the ready endpoints the importer
// imports of that service (polled every 50 ms, so read against 1 s).
func (s LargeSet) EndpointChanges(ctx context.Context, exporter, importer client.Client, exporterID string, i, changes int) ([]float64, error) {
	name := s.Name(i)
	var lags []float64
	for c := range changes {
		ready := c%2 == 1
		want := s.Endpoints - 1
		if ready {
			want = s.Endpoints
		}
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name}}
		patch := fmt.Sprintf(`[{"op":"replace","path":"/endpoints/0/conditions/ready","value":%t}]`, ready)
		changed := time.Now()
		if err := exporter.Patch(ctx, slice, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
			return nil, fmt.Errorf("patch endpointslice %s/%s: %w", s.Namespace, name, err)
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			n, err := s.ReadyImported(ctx, importer, exporterID, name)
			return err == nil && n == want, nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %d ready endpoints never imported: %w", s.Namespace, name, want, err)
		}
		lags = append(lags, time.Since(changed).Seconds())
	}
	return lags, nil
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
	return l.podMetric(ctx, n, ns, pod, port, "process_resident_memory_bytes")
}

// podMetric reads an unlabelled metric from a pod's metrics through the
// API server's proxy.
func (l *Lab) podMetric(ctx context.Context, n *cluster.Cluster, ns, pod string, port int, metric string) (float64, error) {
	out, err := l.Kubectl(ctx, n, "get", "--raw", MetricsPath(ns, pod, port))
	if err != nil {
		return 0, err
	}
	if v, ok := ParseMetrics(out)[metric]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("cluster %s: pod %s/%s publishes no %s", n.Name, ns, pod, metric)
}
