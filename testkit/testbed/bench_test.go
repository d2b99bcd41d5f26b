package testbed

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// The yardstick of the throughput goal carries pod traffic through the bare
// tunnel untranslated: the receiving pod sees the sending pod's own address,
// and the MTU of the tunnel holds for a full-sized ping without fragments.
func TestPodsOverWireGuard(t *testing.T) {
	netns.RequirePrivileged(t)
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

// The machine's CPU counters advance by the time of every core: over half a
// second of wall time, about half a second per core, of which the busy part
// is at most all of it.
func TestReadCPUTimes(t *testing.T) {
	before, err := ReadCPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	time.Sleep(500 * time.Millisecond)
	after, err := ReadCPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	// The cores the counters sum: the per-core lines of /proc/stat (not
	// the cores this process may run on, which a cpuset can narrow).
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	cores := 0
	for _, line := range strings.Split(string(stat), "\n") {
		if strings.HasPrefix(line, "cpu") && !strings.HasPrefix(line, "cpu ") {
			cores++
		}
	}
	want := time.Since(start) * time.Duration(cores)
	all, busy := after.All()-before.All(), after.Busy-before.Busy
	if all < want*6/10 || all > want*14/10 {
		t.Errorf("all cores' time advanced %v over %v of wall time on %d cores, want about %v", all, time.Since(start), cores, want)
	}
	if busy < 0 || busy > all {
		t.Errorf("busy time advanced %v, want 0 to %v", busy, all)
	}
}
