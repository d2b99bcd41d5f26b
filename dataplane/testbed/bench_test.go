package testbed

import (
	"context"
	"testing"
	"time"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/nstest"
)

// The yardstick of the throughput goal carries pod traffic through the bare
// tunnel untranslated: the receiving pod sees the sending pod's own address,
// and the MTU of the tunnel holds for a full-sized ping without fragments.
func TestPodsOverWireGuard(t *testing.T) {
	nstest.RequirePrivileged(t)
	dir := t.TempDir()
	bin, err := BuildWGBare(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := PodsOverWireGuard(bin, dir, netv1beta1.DefaultMTU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	if p.Dst != barePodIPs[1] {
		t.Fatalf("Dst %s, want the receiving pod %s", p.Dst, barePodIPs[1])
	}
	if _, err := WaitPing(context.Background(), p.Sender, p.Dst, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	seen, err := ObserveTCP(p.Receiver, p.Sender, p.Dst, 8090)
	if err != nil {
		t.Fatal(err)
	}
	if seen != barePodIPs[0] {
		t.Errorf("receiving pod saw %s, want the sending pod's own %s", seen, barePodIPs[0])
	}
	// 1340 bytes of IPv4 packet: 1312 of ICMP payload, DF set.
	if out, err := p.Sender.Run("ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1312", p.Dst.String()); err != nil {
		t.Errorf("a packet of the tunnel's MTU does not pass: %v\n%s", err, out)
	}
}
