package labctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/lab/figures"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/echoapi"
)

const (
	// probeInterval is the resolution of the recovery figures.
	probeInterval = 100 * time.Millisecond
	// measureFor is how long each throughput and rate measurement runs.
	measureFor = 5 * time.Second
	// recoveryWatch is how long traffic is watched after a gateway pod is
	// deleted.
	recoveryWatch = 20 * time.Second
)

// BenchParts are the parts of the benchmark that Bench can run.
var BenchParts = []string{"connect", "dataplane", "services", "failover"}

// Bench peers the first two clusters of a fresh lab and measures it: every
// part of BenchParts, or only those of only when it is not empty
// (connecting is always done, as the others need it).
func (l *Lab) Bench(ctx context.Context, only ...string) (figures.Figures, error) {
	f := figures.Figures{RecoverySeconds: map[string]float64{}, FailoverSeconds: map[string]float64{}}
	if len(l.Clusters) < 2 {
		return f, errors.New("the benchmark needs two clusters")
	}
	a, b := l.Clusters[0], l.Clusters[1]
	if _, err := l.Connect(ctx, a, b); err != nil {
		return f, err
	}
	applied := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := l.WaitConnected(wctx, a, b); err != nil {
		return f, err
	}
	f.ConnectSeconds = time.Since(applied).Seconds()
	l.progress.Logf("Connected %.2fs after the last manifest", f.ConnectSeconds)
	runs := func(part string) bool { return len(only) == 0 || slices.Contains(only, part) }
	if runs("dataplane") {
		if err := l.benchDataplane(ctx, a, b, &f); err != nil {
			return f, err
		}
		if err := l.WaitConnected(wctx, a, b); err != nil {
			return f, err
		}
	}
	if runs("services") {
		var err error
		if f.Services, err = l.BenchServices(ctx, a, b); err != nil {
			return f, err
		}
	}
	// The failover is measured with the services' 100,000 endpoints
	// imported, once kube-proxy has programmed the burst the services part
	// made: a gateway's Service changes when its active pod does.
	if runs("failover") {
		if runs("services") {
			if err := l.WaitKubeProxySynced(ctx, 5*time.Minute, a, b); err != nil {
				return f, err
			}
		}
		if err := l.benchFailover(ctx, a, b, &f); err != nil {
			return f, err
		}
	}
	return f, nil
}

// benchDataplane measures pod-to-pod traffic through the peering and over
// the node network, and the recovery from the loss of each gateway pod.
func (l *Lab) benchDataplane(ctx context.Context, a, b *cluster.Cluster, f *figures.Figures) error {
	src, dst, err := l.echoPodsOf(ctx, a, b)
	if err != nil {
		return err
	}
	from, to := src[0], dst[0]
	remapped, err := l.RemappedIP(ctx, a, b, to.Status.PodIP)
	if err != nil {
		return err
	}
	// The traffic must flow before it is measured.
	if _, _, err := l.reachEventually(ctx, a, b); err != nil {
		return err
	}
	nodePorts, err := l.exposeEcho(ctx, b, to)
	if err != nil {
		return err
	}
	paths := []struct {
		path     *figures.Path
		sink, rr string
		name     string
	}{
		{&f.Bare, fmt.Sprintf("%s:%d", b.NodeIP(), nodePorts[EchoSinkPort]), fmt.Sprintf("%s:%d", b.NodeIP(), nodePorts[EchoRRPort]), "node network"},
		{&f.Tunnel, fmt.Sprintf("%s:%d", remapped, EchoSinkPort), fmt.Sprintf("%s:%d", remapped, EchoRRPort), "peering"},
	}
	for _, p := range paths {
		// A NodePort just made answers once kube-proxy has programmed
		// it: the first measurement may be refused.
		var stream echoapi.Measured
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			var merr error
			stream, merr = l.Measure(ctx, a, from.Name, "stream", p.sink, measureFor)
			return merr == nil, nil
		})
		if err != nil {
			return fmt.Errorf("cluster %s: no stream to %s over the %s: %w", a.Name, p.sink, p.name, err)
		}
		rr, err := l.Measure(ctx, a, from.Name, "rr", p.rr, measureFor)
		if err != nil {
			return err
		}
		p.path.BitsPerSecond, p.path.ExchangesPerSecond = stream.BitsPerSecond, rr.PerSecond
		l.progress.Logf("%s: %.0f Mbit/s, %.0f exchanges/s", p.name, stream.BitsPerSecond/1e6, rr.PerSecond)
	}

	url := EchoURL(remapped)
	return l.recoveries(ctx, a, b, url, "bench-probe-", "gateway pod", f.RecoverySeconds)
}

// recoveries deletes the active gateway pod of b, then of a, while a probe
// of a (named prefix and the cluster's name) sends requests to url, and
// records the longest time without an answer of each side in into.
func (l *Lab) recoveries(ctx context.Context, a, b *cluster.Cluster, url, prefix, what string, into map[string]float64) error {
	for _, n := range []*cluster.Cluster{b, a} {
		gap, err := l.recovery(ctx, a, url, n, prefix+n.Name)
		if err != nil {
			return err
		}
		into[n.Name] = gap.Seconds()
		l.progress.Logf("%s of %s deleted: longest time without traffic %.2fs", what, n.Name, gap.Seconds())
	}
	return nil
}

// benchFailover measures, with a standby replica on each side, the
// longest time without traffic when each side's active gateway pod is
// deleted.
func (l *Lab) benchFailover(ctx context.Context, a, b *cluster.Cluster, f *figures.Figures) error {
	_, dst, err := l.echoPodsOf(ctx, a, b)
	if err != nil {
		return err
	}
	remapped, err := l.RemappedIP(ctx, a, b, dst[0].Status.PodIP)
	if err != nil {
		return err
	}
	for _, n := range []*cluster.Cluster{a, b} {
		if err := l.ScaleGateways(ctx, n, failoverReplicas); err != nil {
			return err
		}
	}
	url := EchoURL(remapped)
	before := kubeProxySyncs(a, b)
	if err := l.recoveries(ctx, a, b, url, "bench-failover-", fmt.Sprintf("%d replicas: active gateway pod", failoverReplicas), f.FailoverSeconds); err != nil {
		return err
	}
	// A server's failover waits for kube-proxy to move the client's flow
	// to the new pod: its syncs meanwhile say what that costs.
	for node, after := range kubeProxySyncs(a, b) {
		if prev, ok := before[node]; ok && after.count > prev.count {
			l.progress.Logf("kube-proxy of %s synced %d times during the failovers, %.0f ms each on average",
				node, int(after.count-prev.count), 1000*(after.seconds-prev.seconds)/(after.count-prev.count))
		}
	}
	return nil
}

// syncTotals are kube-proxy's counts of syncs and the time they took.
type syncTotals struct{ count, seconds float64 }

// kubeProxySyncs reads the totals of kube-proxy's syncs on every node of
// the clusters, by node name; a node whose metrics cannot be read is left
// out.
func kubeProxySyncs(clusters ...*cluster.Cluster) map[string]syncTotals {
	out := map[string]syncTotals{}
	for _, c := range clusters {
		for _, n := range c.Nodes() {
			m, err := nodeKubeProxyMetrics(n)
			if err != nil {
				continue
			}
			out[n.Name()] = syncTotals{count: m[`kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"}`],
				seconds: m[`kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"}`]}
		}
	}
	return out
}

// failoverReplicas is the number of gateway pods of each side when the
// failover is measured.
const failoverReplicas = 2

// ScaleGateways sets spec.replicas of every gateway of cluster n, as a user
// does with kubectl, and waits until each gateway has that many Ready pods,
// one of them active.
func (l *Lab) ScaleGateways(ctx context.Context, n *cluster.Cluster, replicas int) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	for _, kind := range []string{"gatewayservers", "gatewayclients"} {
		out, err := l.Kubectl(ctx, n, "get", kind, "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}")
		if err != nil {
			return err
		}
		for _, ref := range strings.Fields(string(out)) {
			ns, name, _ := strings.Cut(ref, "/")
			if _, err := l.Kubectl(ctx, n, "-n", ns, "patch", kind, name, "--type=merge", "-p", patch); err != nil {
				return err
			}
		}
	}
	cs, err := n.Clientset()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		pods, err := cs.CoreV1().Pods("").List(wctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=peerlink-gateway"})
		ready, active := 0, 0
		if err == nil {
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil {
					continue
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
				if p.Labels[netv1beta1.ActiveGatewayLabel] == "true" {
					active++
				}
			}
			if ready == replicas && active == 1 {
				return nil
			}
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("cluster %s: waiting for %d Ready gateway pods, one active (now %d Ready, %d active; %v): %w", n.Name, replicas, ready, active, err, wctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// recovery deletes the active gateway pod of cluster n while a probe pod
// name in cluster src sends requests to url, and returns the longest time
// without answer.
func (l *Lab) recovery(ctx context.Context, src *cluster.Cluster, url string, n *cluster.Cluster, name string) (time.Duration, error) {
	if err := l.StartProbe(ctx, src, name, url, probeInterval, recoveryWatch+30*time.Second); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := l.ProbeResults(ctx, src, name)
		if err == nil && len(res) > 0 && res[len(res)-1].OK {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("probe %s: no answer before the gateway pod is deleted (%v)", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	deleted := time.Now()
	if _, err := l.Kubectl(ctx, n, "delete", "pods", "-A", "-l", netv1beta1.ActiveGatewayLabel, "--wait=false"); err != nil {
		return 0, err
	}
	time.Sleep(recoveryWatch)
	res, err := l.ProbeResults(ctx, src, name)
	if err != nil {
		return 0, err
	}
	return LongestGap(res, deleted, deleted.Add(recoveryWatch)), nil
}

// Measure runs `echo stream` or `echo rr` (mode) for d in a pod of n
// against addr.
func (l *Lab) Measure(ctx context.Context, n *cluster.Cluster, pod, mode, addr string, d time.Duration) (echoapi.Measured, error) {
	var m echoapi.Measured
	out, err := l.Kubectl(ctx, n, "-n", EchoNamespace, "exec", pod, "--", "/echo", mode, "--duration="+d.String(), addr)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return m, fmt.Errorf("cluster %s: echo %s %s: %w: %s", n.Name, mode, addr, err, out)
	}
	return m, nil
}

// Transfer sends size bytes over TCP from a pod of n to the sink at addr
// with `echo transfer`, which ends when the sink has read them all.
func (l *Lab) Transfer(ctx context.Context, n *cluster.Cluster, pod, addr string, size int64) (echoapi.Measured, error) {
	var m echoapi.Measured
	out, err := l.Kubectl(ctx, n, "-n", EchoNamespace, "exec", pod, "--", "/echo", "transfer", "--bytes="+strconv.FormatInt(size, 10), addr)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return m, fmt.Errorf("cluster %s: echo transfer %s: %w: %s", n.Name, addr, err, out)
	}
	return m, nil
}

// exposeEcho makes the sink and request/response ports of pod a NodePort
// Service of cluster n, so that the same pod is measured over the node
// network as through the peering; it returns the node port of each.
func (l *Lab) exposeEcho(ctx context.Context, n *cluster.Cluster, pod corev1.Pod) (map[int]int32, error) {
	const target = "lab.peerlink.io/bench-target"
	if _, err := l.Kubectl(ctx, n, "-n", EchoNamespace, "label", "pod", pod.Name, target+"=true"); err != nil {
		return nil, err
	}
	cs, err := n.Clientset()
	if err != nil {
		return nil, err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-bench", Namespace: EchoNamespace},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{target: "true"},
		},
	}
	for _, port := range []int{EchoSinkPort, EchoRRPort} {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: strconv.Itoa(port), Port: int32(port), TargetPort: intstr.FromInt(port), Protocol: corev1.ProtocolTCP,
		})
	}
	created, err := cs.CoreV1().Services(EchoNamespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: create service echo-bench: %w", n.Name, err)
	}
	out := map[int]int32{}
	for _, p := range created.Spec.Ports {
		out[int(p.Port)] = p.NodePort
	}
	return out, nil
}
