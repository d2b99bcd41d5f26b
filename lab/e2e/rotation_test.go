package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// rotationProbeInterval is the pace of the requests whose losses a key
// rotation is judged by.
const rotationProbeInterval = 50 * time.Millisecond

// TestKeyRotation rotates the key pair of each side's gateway of a peering
// made with peerlink network connect, with peerlink rotate-key and both
// kubeconfigs, while a pod of the client's cluster sends a request every
// 50 ms to a pod of the server's. Each request goes on a new connection
// with a timeout of 1 s: a packet lost either way fails its request (a lost
// SYN or SYN-ACK is sent again only after 1 s). Not one may fail, and each
// side's tunnel must run on its new key pair afterwards, the old one gone
// from the key Secret.
func TestKeyRotation(t *testing.T) {
	alone(t)
	ctx, l := newLabWith(t, 25*time.Minute, labctl.Options{Names: []string{"rot-a", "rot-b"}, Nodes: 1})
	a, b := l.Clusters[0], l.Clusters[1]
	if out, err := l.Connect(ctx, a, b); err != nil {
		t.Fatalf("connect: %v\n%s", err, out)
	}
	waitConnected(t, ctx, l, a, b)

	const probe = "rotation-probe"
	startProbe(t, ctx, l, a, b, probe, rotationProbeInterval, labctl.ProbeTimeout, 15*time.Minute)
	traceRotation(t, ctx, l, a, b)

	for _, side := range []struct {
		n, peer *cluster.Cluster
		kind    string
	}{{a, b, "gatewayclient"}, {b, a, "gatewayserver"}} {
		before := publishedKey(t, ctx, l, side.n, side.kind, side.peer.ClusterID)
		if side.n == b {
			// A rotation cut short leaves it under way; another
			// rotate-key carries it to its end.
			if out, err := l.Peerlink(ctx, "rotate-key", "--peer", side.peer.ClusterID, "--timeout", "2s",
				"--kubeconfig", side.n.Kubeconfig(), "--remote-kubeconfig", side.peer.Kubeconfig()); err == nil {
				t.Fatalf("a rotate-key given 2 s ended without an error:\n%s", out)
			} else {
				t.Logf("rotate-key given 2 s: %v", err)
			}
		}
		start := time.Now()
		if out, err := l.Peerlink(ctx, "rotate-key", "--peer", side.peer.ClusterID,
			"--kubeconfig", side.n.Kubeconfig(), "--remote-kubeconfig", side.peer.Kubeconfig()); err != nil {
			t.Fatalf("rotate the key of %s: %v\n%s", side.n.Name, err, out)
		}
		took := time.Since(start)
		sent, failed := failedRequests(t, ctx, l, a, probe, start, start.Add(took))
		after := publishedKey(t, ctx, l, side.n, side.kind, side.peer.ClusterID)
		t.Logf("%s's key rotated in %.1fs: %d requests sent meanwhile, %d failed", side.n.Name, took.Seconds(), sent, failed)
		checkNoneFailed(t, side.n.Name+"'s key rotation", took, sent, failed)
		if after == "" || before == after {
			t.Errorf("%s's gateway still publishes its old public key", side.n.Name)
		}
		conn := kubectlOut(t, ctx, l, side.n, "get", "connections", "-A", "-o", "jsonpath={.items[0].status.publicKey}")
		if conn != after {
			t.Errorf("%s's Connection reports the tunnel on %s, want the new key %s", side.n.Name, conn, after)
		}
		// What the peer's gateway knows this side by: the new key alone.
		// A PublicKey holding the old key would keep the tunnel down for
		// good, and every later rotation with it.
		pk := kubectlOut(t, ctx, l, side.peer, "get", "publickeies", "-A", "-l", "liqo.io/remote-cluster-id="+side.n.ClusterID,
			"-o", "jsonpath={.items[*].spec.publicKey}/{.items[*].spec.nextPublicKey}")
		if pk != after+"/" {
			t.Errorf("%s's PublicKey of %s: %q (publicKey/nextPublicKey), want the new key alone %s", side.peer.Name, side.n.Name, pk, after)
		}
		secret := kubectlOut(t, ctx, l, side.n, "get", "secrets", "-A", "-l", "networking.liqo.io/gateway-resource=true",
			"-o", "jsonpath={.items[*].data.nextPrivateKey}")
		if secret != "" {
			t.Errorf("%s's key Secret still holds a next pair", side.n.Name)
		}
	}
	waitConnected(t, ctx, l, a, b)
}

// publishedKey is the public key, in base64, the gateway of kind of
// cluster n's peering with peer publishes.
func publishedKey(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, kind, peer string) string {
	t.Helper()
	return kubectlOut(t, ctx, l, n, "get", kind, "-A", "-l", "liqo.io/remote-cluster-id="+peer, "-o", "jsonpath={.items[0].status.publicKey}")
}

// startProbe starts a probe on the control-plane node of cluster a (it
// stays up) sending a request every interval, each limited to timeout, for
// d, to an echo pod of b, and waits for its answers.
func startProbe(t *testing.T, ctx context.Context, l *labctl.Lab, a, b *cluster.Cluster, name string, interval, timeout, d time.Duration) {
	t.Helper()
	to := echoPods(t, ctx, l, b)[0]
	ip, err := l.RemappedIP(ctx, a, b, to.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StartProbeOn(ctx, a, a.ControlPlane().Name(), name, fmt.Sprintf("http://%s:%d/", ip, labctl.EchoPort), interval, timeout, d); err != nil {
		t.Fatal(err)
	}
	waitAnswered(t, ctx, l, a, name)
}

// failedRequests counts the requests probe name of cluster n sent between
// from and until, and those of them that failed (logged).
func failedRequests(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, name string, from, until time.Time) (sent, failed int) {
	t.Helper()
	// Requests still in flight at until get their second.
	time.Sleep(2 * time.Second)
	res, err := l.ProbeResults(ctx, n, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res {
		if at := time.UnixMilli(p.UnixMilli); at.Before(from) || at.After(until) {
			continue
		}
		sent++
		if !p.OK {
			failed++
			t.Logf("request at %s failed: %s", time.UnixMilli(p.UnixMilli).Format(time.RFC3339Nano), p.Error)
		}
	}
	return sent, failed
}

// checkNoneFailed fails t when a request failed during what, which took
// took, or when too few were sent to tell.
func checkNoneFailed(t *testing.T, what string, took time.Duration, sent, failed int) {
	t.Helper()
	if failed > 0 || sent < int(took/rotationProbeInterval)/2 {
		t.Errorf("%s: %d of %d requests failed in %.1fs, want none of at least %d", what, failed, sent, took.Seconds(), int(took/rotationProbeInterval)/2)
	}
}

// traceRotation logs, until the test ends, every change of what the
// clusters' gateways and Connections say of their keys: the published key,
// the key rotation's status and the key the tunnel runs on, each key by
// the first characters of its base64. A rotation that stalls shows where.
func traceRotation(t *testing.T, ctx context.Context, l *labctl.Lab, clusters ...*cluster.Cluster) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, n := range clusters {
		c, err := l.Client(n)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := ""
			for ctx.Err() == nil {
				if now, err := rotationState(ctx, c); err == nil && now != last {
					t.Logf("%s: %s", n.Name, now)
					last = now
				}
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
			}
		}()
	}
}

// rotationState describes the keys of every gateway and Connection c
// lists, in one line.
func rotationState(ctx context.Context, c client.Client) (string, error) {
	short := func(k []byte) string {
		if len(k) == 0 {
			return "-"
		}
		return base64.StdEncoding.EncodeToString(k)[:8]
	}
	rotation := func(r *netv1beta1.KeyRotationStatus) string {
		if r == nil {
			return "none"
		}
		since := "-"
		if r.InUseSince != nil {
			since = r.InUseSince.Format(time.TimeOnly)
		}
		return fmt.Sprintf("requested=%q next=%s inUseSince=%s", r.Requested, short(r.NextPublicKey), since)
	}
	var parts []string
	var servers netv1beta1.GatewayServerList
	var clients netv1beta1.GatewayClientList
	var conns netv1beta1.ConnectionList
	for _, list := range []client.ObjectList{&servers, &clients, &conns} {
		if err := c.List(ctx, list); err != nil {
			return "", err
		}
	}
	for _, g := range servers.Items {
		parts = append(parts, fmt.Sprintf("server key=%s rotation{%s}", short(g.Status.PublicKey), rotation(g.Status.KeyRotation)))
	}
	for _, g := range clients.Items {
		parts = append(parts, fmt.Sprintf("client key=%s rotation{%s}", short(g.Status.PublicKey), rotation(g.Status.KeyRotation)))
	}
	for _, cn := range conns.Items {
		parts = append(parts, fmt.Sprintf("connection %s tunnel key=%s", cn.Status.Value, short(cn.Status.PublicKey)))
	}
	return strings.Join(parts, "; "), nil
}
