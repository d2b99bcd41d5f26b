package labctl

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/lab/figures"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/mcs"
)

// MeshClusters is the number of clusters of the mesh benchmark: ten
// peerings, each cluster the client of some and the server of others.
const MeshClusters = 5

// meshCallTimeout bounds the wait for one cluster's first answer through
// a peer's exported Service.
const meshCallTimeout = 3 * time.Minute

// BenchMesh peers every pair of the lab's clusters with network connect
// (the first of the pair the client), has each cluster export the Service
// ExportedEchoName of its echo pods, and measures: the time from the
// first connect to every peering Connected, then to every cluster having
// called every other's Service by its clusterset name and been answered
// by that cluster's pods, and the resident memory of every gateway (one
// per peering on each side) and of every controller (serving its four
// peers).
func (l *Lab) BenchMesh(ctx context.Context) (figures.Mesh, error) {
	f := figures.Mesh{Clusters: len(l.Clusters)}
	var pairs [][2]*cluster.Cluster
	for i, a := range l.Clusters {
		for _, b := range l.Clusters[i+1:] {
			pairs = append(pairs, [2]*cluster.Cluster{a, b})
		}
	}
	f.Peerings = len(pairs)
	start := time.Now()
	for _, p := range pairs {
		if _, err := l.Connect(ctx, p[0], p[1]); err != nil {
			return f, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for _, p := range pairs {
		if err := l.WaitConnected(wctx, p[0], p[1]); err != nil {
			return f, err
		}
	}
	f.ConnectedSeconds = time.Since(start).Seconds()
	l.progress.Logf("full mesh: %d peerings of %d clusters Connected %.1fs after the first connect", len(pairs), len(l.Clusters), f.ConnectedSeconds)

	for _, n := range l.Clusters {
		if err := l.ExportEcho(ctx, n); err != nil {
			return f, err
		}
	}
	for _, a := range l.Clusters {
		pods, err := l.EchoPods(ctx, a)
		if err != nil {
			return f, err
		}
		for _, b := range l.Clusters {
			if a == b {
				continue
			}
			if _, err := l.CallExportedEcho(ctx, a, pods[0], b); err != nil {
				return f, err
			}
		}
	}
	f.ServicesSeconds = time.Since(start).Seconds()
	l.progress.Logf("every cluster answered by every other's Service, by name, %.1fs after the first connect", f.ServicesSeconds)

	for _, n := range l.Clusters {
		gateways, err := l.activeGateways(ctx, n)
		if err != nil {
			return f, err
		}
		for _, pod := range gateways {
			rss, err := l.residentMemory(ctx, n, pod.Namespace, pod.Name, GatewayMetricsPort)
			if err != nil {
				return f, err
			}
			f.GatewayMemory = append(f.GatewayMemory, rss)
		}
		ns, name, port, err := l.podOf(ctx, n, PeerlinkNamespace, ControllerSelector, ControllerMetricsPort)
		if err != nil {
			return f, err
		}
		rss, err := l.residentMemory(ctx, n, ns, name, port)
		if err != nil {
			return f, err
		}
		f.ControllerMemory = append(f.ControllerMemory, rss)
	}
	return f, l.idleCPU(ctx, &f)
}

// idleWindow is how long the mesh is left idle to measure the CPU its
// gateways and controllers take.
const idleWindow = 30 * time.Second

// idleCPU measures the CPU each active gateway pod and each controller of
// the mesh takes over idleWindow with no traffic but the tunnels' own.
func (l *Lab) idleCPU(ctx context.Context, f *figures.Mesh) error {
	type process struct {
		n                *cluster.Cluster
		ns, name         string
		port             int
		controller       bool
		before, measured float64
	}
	var all []*process
	for _, n := range l.Clusters {
		gateways, err := l.activeGateways(ctx, n)
		if err != nil {
			return err
		}
		for _, pod := range gateways {
			all = append(all, &process{n: n, ns: pod.Namespace, name: pod.Name, port: GatewayMetricsPort})
		}
		ns, name, port, err := l.podOf(ctx, n, PeerlinkNamespace, ControllerSelector, ControllerMetricsPort)
		if err != nil {
			return err
		}
		all = append(all, &process{n: n, ns: ns, name: name, port: port, controller: true})
	}
	read := func(p *process) (float64, error) {
		return l.podMetric(ctx, p.n, p.ns, p.name, p.port, "process_cpu_seconds_total")
	}
	for _, p := range all {
		v, err := read(p)
		if err != nil {
			return err
		}
		p.before, p.measured = v, float64(time.Now().UnixNano())
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idleWindow):
	}
	for _, p := range all {
		v, err := read(p)
		if err != nil {
			return err
		}
		share := (v - p.before) / (float64(time.Now().UnixNano()) - p.measured) * 1e9
		if p.controller {
			f.ControllerIdleCPU = append(f.ControllerIdleCPU, share)
		} else {
			f.GatewayIdleCPU = append(f.GatewayIdleCPU, share)
		}
	}
	l.progress.Logf("idle CPU over %s: %d gateways, %d controllers measured", idleWindow, len(f.GatewayIdleCPU), len(f.ControllerIdleCPU))
	return nil
}

// activeGateways returns the active gateway pods of cluster n, one per
// peering.
func (l *Lab) activeGateways(ctx context.Context, n *cluster.Cluster) ([]corev1.Pod, error) {
	cs, err := n.Clientset()
	if err != nil {
		return nil, err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: netv1beta1.ActiveGatewayLabel + "=true"})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: list the active gateway pods: %w", n.Name, err)
	}
	return pods.Items, nil
}

// ExportedEchoName is the name of the Service of cluster n's echo pods
// that ExportEcho exports.
func ExportedEchoName(n *cluster.Cluster) string { return "echo-" + n.Name }

// ExportEcho exports from n the Service ExportedEchoName of its echo pods,
// in the echo namespace, which takes the peers' exports too.
func (l *Lab) ExportEcho(ctx context.Context, n *cluster.Cluster) error {
	if _, err := l.Kubectl(ctx, n, "label", "--overwrite", "namespace", EchoNamespace, mcs.ImportNamespaceLabel+"=true"); err != nil {
		return err
	}
	c, err := l.Client(n)
	if err != nil {
		return err
	}
	name := ExportedEchoName(n)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: EchoNamespace, Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": EchoDeployment},
			Ports: []corev1.ServicePort{{Name: "http", Port: EchoPort}}},
	}
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("cluster %s: create Service %s/%s: %w", n.Name, EchoNamespace, name, err)
	}
	export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: EchoNamespace, Name: name}}
	if err := c.Create(ctx, export); err != nil {
		return fmt.Errorf("cluster %s: create ServiceExport %s/%s: %w", n.Name, EchoNamespace, name, err)
	}
	return nil
}

// CallExportedEcho calls from pod of a, by its clusterset name, the Service
// b exports with ExportEcho, until one of b's echo pods answers, and
// returns the answer.
func (l *Lab) CallExportedEcho(ctx context.Context, a *cluster.Cluster, pod corev1.Pod, b *cluster.Cluster) (string, error) {
	bPods, err := l.EchoPods(ctx, b)
	if err != nil {
		return "", err
	}
	url := fmt.Sprintf("http://%s.%s.svc.%s:%d/", ExportedEchoName(b), EchoNamespace, cluster.ClustersetDomain, EchoPort)
	var answer string
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, meshCallTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := l.EchoGet(ctx, a, pod.Name, url)
		if err != nil {
			last = err
			return false, nil
		}
		if !slices.ContainsFunc(bPods, func(p corev1.Pod) bool { return p.Name == got.Reply.Pod }) {
			last = fmt.Errorf("answered by %s, not an echo pod of %s", got.Reply.Pod, b.Name)
			return false, nil
		}
		answer = fmt.Sprintf("%s -> %s: answered by %s, caller seen as %s", a.Name, url, got.Reply.Pod, got.Reply.Client)
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("cluster %s calls %s: %w (last: %v)", a.Name, url, err, last)
	}
	return answer, nil
}
