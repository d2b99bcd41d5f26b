package labctl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// kubeProxyMetrics is the address of kube-proxy's metrics in each node's
// network namespace (the lab's kube-proxy configuration).
const kubeProxyMetrics = "127.0.0.1:10249"

// WaitKubeProxySynced waits until kube-proxy on every node of the clusters
// has programmed every Service and endpoint change it has seen: none
// pending, and its last sync no older than the last change it queued. After
// a burst of 100,000 endpoints, the next change of one Service (a gateway's)
// would otherwise wait behind the burst.
func (l *Lab) WaitKubeProxySynced(ctx context.Context, d time.Duration, clusters ...*cluster.Cluster) error {
	for _, c := range clusters {
		for _, n := range c.Nodes() {
			var last string
			err := wait.PollUntilContextTimeout(ctx, time.Second, d, true, func(context.Context) (bool, error) {
				m, err := nodeKubeProxyMetrics(n)
				if err != nil {
					last = err.Error()
					return false, nil
				}
				pending := m["kubeproxy_sync_proxy_rules_endpoint_changes_pending"] + m["kubeproxy_sync_proxy_rules_service_changes_pending"]
				queued, synced := m[`kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"}`], m[`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`]
				last = fmt.Sprintf("%.0f changes pending, last queued %.1f s after the last sync", pending, queued-synced)
				return pending == 0 && synced >= queued, nil
			})
			if err != nil {
				return fmt.Errorf("cluster %s: kube-proxy of node %s not synced within %v: %s", c.Name, n.Name(), d, last)
			}
		}
	}
	return nil
}

// nodeKubeProxyMetrics reads the samples of kube-proxy's metrics on node n,
// by name with labels, through a connection made in the node's network
// namespace.
func nodeKubeProxyMetrics(n *cluster.Node) (map[string]float64, error) {
	ns, err := netns.Open(n.Namespace())
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	var conn net.Conn
	if err := ns.Do(func() (err error) {
		conn, err = net.DialTimeout("tcp", kubeProxyMetrics, 5*time.Second)
		return err
	}); err != nil {
		return nil, fmt.Errorf("node %s: kube-proxy's metrics: %w", n.Name(), err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n"); err != nil {
		return nil, err
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "kubeproxy_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			samples[line[:i]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("node %s: read kube-proxy's metrics: %w", n.Name(), err)
	}
	return samples, nil
}
