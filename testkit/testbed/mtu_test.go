package testbed

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// TestMTUMismatch runs both gateways with the same MTU, then restarts the
// server's with another one: each side's Connection reports the MTU the
// peer announces through the tunnel, MTUMismatch False while they agree and
// True naming both values once they differ, and the gateway's metrics say
// the same. Each side's Connection also shows how the peer reaches this
// side's ranges, as the peer's gateway announces it: the peer's
// Configuration of this side.
func TestMTUMismatch(t *testing.T) {
	bed := up(t, sameRemaps)
	waitConnected(t, bed.A)
	waitConnected(t, bed.B)
	waitPeerView(t, bed.A, bed.B)
	waitPeerView(t, bed.B, bed.A)
	waitMTUs(t, bed.A, 1340, metav1.ConditionFalse, "1340")
	waitMTUs(t, bed.B, 1340, metav1.ConditionFalse, "1340")
	waitMetrics(t, bed.A.Side.Gateway, "peerlink_gateway_peer_mtu_bytes 1340", "peerlink_gateway_mtu_mismatch 0")

	if err := bed.B.Gateway.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop the server's gateway: %v\n%s", err, proc.Tail(bed.B.Gateway.Log, 20))
	}
	p, err := bed.B.Gateway.Again("--mtu=1280")
	if err != nil {
		t.Fatal(err)
	}
	bed.B.Gateway = p
	waitMTUs(t, bed.A, 1280, metav1.ConditionTrue, "1340", "1280")
	waitMTUs(t, bed.B, 1340, metav1.ConditionTrue, "1280", "1340")
	waitMetrics(t, bed.A.Side.Gateway, "peerlink_gateway_peer_mtu_bytes 1280", "peerlink_gateway_mtu_mismatch 1")
	waitMetrics(t, bed.B.Side.Gateway, "peerlink_gateway_peer_mtu_bytes 1340", "peerlink_gateway_mtu_mismatch 1")
}

// waitMTUs waits for side r's Connection to report the peer's MTU peerMTU
// and the MTUMismatch condition status, whose message names each of
// values.
func waitMTUs(t *testing.T, r *Running, peerMTU int32, status metav1.ConditionStatus, values ...string) {
	t.Helper()
	waitConnection(t, r, 60*time.Second, func(conn *netv1beta1.Connection) error {
		c := apimeta.FindStatusCondition(conn.Status.Conditions, netv1beta1.ConditionMTUMismatch)
		if conn.Status.PeerMTU != peerMTU || c == nil || c.Status != status || !containsAll(c.Message, values) {
			return fmt.Errorf("peer MTU %d, MTUMismatch %+v; want peer MTU %d and MTUMismatch %s naming %v",
				conn.Status.PeerMTU, c, peerMTU, status, values)
		}
		return nil
	})
}

// waitPeerView waits for side r's Connection to show how peer reaches r's
// ranges: what peer's Configuration of r says.
func waitPeerView(t *testing.T, r, peer *Running) {
	t.Helper()
	ctx := context.Background()
	var confs netv1beta1.ConfigurationList
	if err := peer.Cluster.Client.List(ctx, &confs, client.InNamespace(peer.Peering.Namespace())); err != nil || len(confs.Items) != 1 {
		t.Fatalf("side %s: the Configuration of %s: %v (%d)", peer.Side.Name, r.Side.Name, err, len(confs.Items))
	}
	ranges, err := confs.Items[0].RemappedRanges()
	if err != nil || len(ranges) == 0 {
		t.Fatalf("side %s: the remapped ranges of %s: %v (%d)", peer.Side.Name, r.Side.Name, err, len(ranges))
	}
	var want []netv1beta1.PeerRangeView
	for _, m := range ranges {
		want = append(want, netv1beta1.PeerRangeView{CIDR: netv1beta1.CIDR(m.Real.String()), SeenAs: netv1beta1.CIDR(m.Remapped.String())})
	}
	waitConnection(t, r, 60*time.Second, func(conn *netv1beta1.Connection) error {
		if !slices.Equal(conn.Status.PeerView, want) {
			return fmt.Errorf("peer view %v; want %v", conn.Status.PeerView, want)
		}
		return nil
	})
}

// waitMetrics waits for the gateway agent in ns to export each of lines
// on its metrics port.
func waitMetrics(t *testing.T, ns *netns.NS, lines ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := scrape(ns, "127.0.0.1:8082")
		if err == nil && containsAll(got, lines) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics of the gateway in %s: %v, want %q:\n%s", ns.Name, err, lines, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scrape reads /metrics at addr inside ns, through a socket opened there.
func scrape(ns *netns.NS, addr string) (string, error) {
	var conn net.Conn
	if err := ns.Do(func() (err error) {
		conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	}); err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", addr); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	return string(b), err
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
