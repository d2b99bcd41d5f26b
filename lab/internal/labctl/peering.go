package labctl

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/echoapi"
	"github.com/peerlink/peerlink/peering"
)

// Client is a controller-runtime client of cluster n that knows
// Kubernetes', peerlink's and the Multi-Cluster Services kinds. It is not
// rate-limited: the benchmarks write thousands of objects.
func (l *Lab) Client(n *cluster.Cluster) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("cluster %s kubeconfig: %w", n.Name, err)
	}
	cfg.Timeout = 10 * time.Second
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := peering.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s client: %w", n.Name, err)
	}
	return c, nil
}

// PeerlinkBin is the peerlink CLI built from the repository.
func (l *Lab) PeerlinkBin() string { return l.path("bin", "peerlink") }

// Peerlink runs the peerlink CLI and returns its standard output; its
// standard error (the progress lines) goes to the lab's output.
func (l *Lab) Peerlink(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, l.PeerlinkBin(), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("peerlink %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Connect peers two clusters the way the documentation tells a user holding
// both kubeconfigs to: local is the gateway client, remote the server,
// reachable through a NodePort, or through the default Service type,
// LoadBalancer, when the lab runs a load balancer. flags are more flags of
// network connect.
func (l *Lab) Connect(ctx context.Context, local, remote *cluster.Cluster, flags ...string) ([]byte, error) {
	return l.Peerlink(ctx, append(l.ConnectArgs(local, remote), flags...)...)
}

// ConnectArgs are the arguments of the peerlink CLI that Connect runs.
func (l *Lab) ConnectArgs(local, remote *cluster.Cluster) []string {
	args := []string{"network", "connect", "--kubeconfig", local.Kubeconfig(), "--remote-kubeconfig", remote.Kubeconfig()}
	if l.State.LoadBalancer == NoLoadBalancer {
		args = append(args, "--server-service-type", "NodePort")
	}
	return args
}

// ConnectionState is the status of the Connection of cluster n towards
// peer, or "" while there is none.
func (l *Lab) ConnectionState(ctx context.Context, n, peer *cluster.Cluster) (netv1beta1.ConnectionStatusValue, error) {
	conn, err := l.Connection(ctx, n, peer)
	if err != nil || conn == nil {
		return "", err
	}
	return conn.Status.Value, nil
}

// Connection is the Connection of cluster n towards peer, nil while there
// is none.
func (l *Lab) Connection(ctx context.Context, n, peer *cluster.Cluster) (*netv1beta1.Connection, error) {
	c, err := l.Client(n)
	if err != nil {
		return nil, err
	}
	var conns netv1beta1.ConnectionList
	if err := c.List(ctx, &conns, client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: peer.ClusterID}); err != nil {
		return nil, fmt.Errorf("cluster %s: list connections to %s: %w", n.Name, peer.Name, err)
	}
	switch len(conns.Items) {
	case 0:
		return nil, nil
	case 1:
		return &conns.Items[0], nil
	}
	return nil, fmt.Errorf("cluster %s: %d connections to %s, want one", n.Name, len(conns.Items), peer.Name)
}

// WaitConnected waits until the Connections of both clusters towards each
// other are Connected.
func (l *Lab) WaitConnected(ctx context.Context, a, b *cluster.Cluster) error {
	for {
		sa, errA := l.ConnectionState(ctx, a, b)
		sb, errB := l.ConnectionState(ctx, b, a)
		if errA == nil && errB == nil && sa == netv1beta1.Connected && sb == netv1beta1.Connected {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s and %s to be Connected (now %q, %q; errors %v, %v): %w",
				a.Name, b.Name, sa, sb, errA, errB, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PodCIDRView is how cluster n sees the pod range of peer: the peer's real
// range and the local range it is remapped to, from n's Configuration for
// peer.
func (l *Lab) PodCIDRView(ctx context.Context, n, peer *cluster.Cluster) (real, remapped netip.Prefix, err error) {
	return l.RangeView(ctx, n, peer, "pod")
}

// RangeView is how cluster n sees the first range of peer in the list
// field ("pod" or "external") of n's Configuration for peer: the peer's
// real range and the local range it is remapped to.
func (l *Lab) RangeView(ctx context.Context, n, peer *cluster.Cluster, field string) (real, remapped netip.Prefix, err error) {
	r, err := l.remoteRange(ctx, n, peer, field, func(netv1beta1.RemoteRange) bool { return true })
	return r.Real, r.Remapped, err
}

// remoteRange is the first range of peer in the list field of n's
// Configuration for peer that match accepts, once remapped.
func (l *Lab) remoteRange(ctx context.Context, n, peer *cluster.Cluster, field string, match func(netv1beta1.RemoteRange) bool) (netv1beta1.RemoteRange, error) {
	c, err := l.Client(n)
	if err != nil {
		return netv1beta1.RemoteRange{}, err
	}
	var confs netv1beta1.ConfigurationList
	if err := c.List(ctx, &confs, client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: peer.ClusterID}); err != nil {
		return netv1beta1.RemoteRange{}, fmt.Errorf("cluster %s: list configurations of %s: %w", n.Name, peer.Name, err)
	}
	if len(confs.Items) != 1 {
		return netv1beta1.RemoteRange{}, fmt.Errorf("cluster %s: %d configurations of %s, want one", n.Name, len(confs.Items), peer.Name)
	}
	conf := confs.Items[0]
	ranges, err := conf.RemoteRanges()
	if err != nil {
		return netv1beta1.RemoteRange{}, fmt.Errorf("cluster %s: %w", n.Name, err)
	}
	i := slices.IndexFunc(ranges, func(r netv1beta1.RemoteRange) bool { return r.Field == field && match(r) })
	if i < 0 || !ranges[i].Remapped.IsValid() {
		return netv1beta1.RemoteRange{}, fmt.Errorf("cluster %s: configuration %s/%s has no remapped %s CIDR for it yet", n.Name, conf.Namespace, conf.Name, field)
	}
	return ranges[i], nil
}

// RemappedIP is the address under which cluster n reaches ip, an address of
// peer's pod range of ip's family.
func (l *Lab) RemappedIP(ctx context.Context, n, peer *cluster.Cluster, ip string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("pod IP %q: %w", ip, err)
	}
	r, err := l.remoteRange(ctx, n, peer, "pod", func(r netv1beta1.RemoteRange) bool { return r.Real.Contains(addr) })
	if err != nil {
		return netip.Addr{}, err
	}
	return cidr.Translate(addr, r.Real, r.Remapped)
}

// Reach sends a request from the echo pod from of cluster a to the echo pod
// to of cluster b, at the address a knows it by.
func (l *Lab) Reach(ctx context.Context, a *cluster.Cluster, from corev1.Pod, b *cluster.Cluster, to corev1.Pod) (echoapi.Got, error) {
	ip, err := l.RemappedIP(ctx, a, b, to.Status.PodIP)
	if err != nil {
		return echoapi.Got{}, err
	}
	return l.EchoGet(ctx, a, from.Name, EchoURL(ip))
}
