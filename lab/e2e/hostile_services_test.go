package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vnetns "github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/generators"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/mcs"
)

// TestHostileServiceExchange is the service exchange's trust boundary on
// real clusters: A exports echo to B, then A's gateway turns hostile and
// talks to B's gateway on the exchange's port (TCP 12346, from A's own
// tunnel address, the only one B's gateway answers) with garbage, an
// oversized frame, 100,000 services, names and labels over their bounds,
// and endpoints outside the ranges A declared. B's gateway ends each bad
// connection after bounded work, counts it in its metrics, applies
// nothing of it, and B keeps serving the echo import it had.
func TestHostileServiceExchange(t *testing.T) {
	ctx, l := newPeeredLab(t, 15*time.Minute, "hsvc-a", "hsvc-b")
	a, b := l.Clusters[0], l.Clusters[1]
	ns := labctl.EchoNamespace
	url := fmt.Sprintf("http://echo.%s.svc.%s:%d/", ns, cluster.ClustersetDomain, labctl.EchoPort)
	podsB := echoPods(t, ctx, l, b)

	kubectlOut(t, ctx, l, b, "label", "namespace", ns, mcs.ImportNamespaceLabel+"=true")
	export(t, ctx, l, a, ns, "echo")
	serving := func() error {
		if n := readyEndpoints(t, ctx, b, ns, mcsv1beta1.LabelServiceName+"=echo,"+mcsv1beta1.LabelSourceCluster+"="+a.ClusterID); n == 0 {
			return errors.New("no ready endpoint of A's echo in B")
		}
		if _, err := l.EchoGet(ctx, b, podsB[0].Name, url); err != nil {
			return err
		}
		if got := kubectlOut(t, ctx, l, b, "get", "serviceimports", "-n", ns, "-o", "name"); got != "serviceimport.multicluster.x-k8s.io/echo" {
			return fmt.Errorf("B's imports: %q, want only echo", got)
		}
		return nil
	}
	eventually(t, ctx, "B calls A's echo by its clusterset name", serving)

	// What A's gateway really sends: the good set, resent around the bad
	// services so that a hostile set that is delivered keeps it.
	good := exportedSet(t, ctx, l, a, b.ClusterID)
	gw := gatewayAgent(t, ctx, l, a, b.ClusterID)
	// A is the client of the peering: B's gateway listens.
	from := dataplane.Client.TunnelAddress()
	to := netip.AddrPortFrom(dataplane.Server.TunnelAddress(), dataplane.ServicesPort)

	hello := frame(t, map[string]any{"type": "hello", "version": mcs.Version, "batches": true})
	synced := frame(t, map[string]any{"type": "synced"})
	upserts := func(services ...mcs.Service) []byte {
		var out []byte
		for _, s := range services {
			out = append(out, frame(t, map[string]any{"type": "upsert", "service": s})...)
		}
		return out
	}
	flood := bytes.NewBuffer(hello)
	for i := range 100_000 {
		s := good[0]
		s.Name = fmt.Sprintf("flood-%06d", i)
		flood.Write(upserts(s))
	}
	flood.Write(synced)
	longName, bigLabels := good[0], good[0]
	longName.Name = strings.Repeat("x", 300)
	bigLabels.Name = "big-labels"
	bigLabels.Labels = map[string]string{}
	for i := range 2000 {
		bigLabels.Labels[fmt.Sprintf("l%04d", i)] = strings.Repeat("v", 60)
	}
	outside := good[0]
	outside.Name = "outside"
	outside.Endpoints = []mcs.EndpointGroup{{Ports: good[0].Ports, Endpoints: []mcs.Endpoint{
		{IP: netip.MustParseAddr("8.8.8.8"), Ready: true},
		{IP: netip.MustParseAddr("169.254.169.254"), Ready: true},
		{IP: b.NodeIP(), Ready: true},
	}}}

	cases := []struct {
		name    string
		payload []byte
		// refused is the reason B's gateway must count the connection
		// under, or empty when it is a valid session whose bad services
		// are rejected one by one.
		refused string
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: peerlink\r\n\r\n"), "too-large"},
		{"not the protocol", append(cloneBytes(hello), frame(t, map[string]any{"type": "exec", "command": "rm -rf /"})...), "malformed"},
		{"oversized frame", append(append(cloneBytes(hello), binary.BigEndian.AppendUint32(nil, 2<<20)...), bytes.Repeat([]byte("x"), 2<<20)...), "too-large"},
		{"100,000 services", flood.Bytes(), "too-large"},
		{"names and labels over their bounds", append(append(cloneBytes(hello), upserts(append(good, longName, bigLabels)...)...), synced...), ""},
		{"endpoints outside the declared ranges", append(append(cloneBytes(hello), upserts(append(good, outside)...)...), synced...), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := gatewayMetrics(t, ctx, l, b, a.ClusterID)
			mem := &peakMemory{}
			stopSampling := mem.sample(t, ctx, l, b, a.ClusterID)
			conn, err := gw.dial(from, to)
			if err != nil {
				stopSampling()
				t.Fatalf("connect from A's tunnel address %s to %s: %v", from, to, err)
			}
			start := time.Now()
			go func() { _, _ = conn.Write(tc.payload) }()
			// B's gateway ends a refused connection itself; a valid one
			// lasts until A's own agent connects again and replaces it.
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, _ = io.Copy(io.Discard, conn)
			ended := time.Since(start)
			conn.Close()
			time.Sleep(500 * time.Millisecond)
			stopSampling()
			after := gatewayMetrics(t, ctx, l, b, a.ClusterID)
			t.Logf("%d bytes sent; B's gateway ended the connection after %v; its resident memory %.0f MiB before, at most %.0f MiB meanwhile",
				len(tc.payload), ended.Round(time.Millisecond), before[residentMemory]/(1<<20), mem.peak()/(1<<20))
			if tc.refused != "" {
				key := refusedMetric + `{reason="` + tc.refused + `"}`
				if after[key] <= before[key] {
					t.Errorf("%s: %v before, %v after: the refusal is not counted", key, before[key], after[key])
				}
				if ended > 5*time.Second {
					t.Errorf("B's gateway took %v to refuse", ended)
				}
			}
			if tc.name == "endpoints outside the declared ranges" {
				eventually(t, ctx, "an EndpointsOutsideRanges event in B", func() error {
					out := kubectlOut(t, ctx, l, b, "get", "events", "-n", generators.TenantNamespace(a.ClusterID),
						"--field-selector", "reason=EndpointsOutsideRanges", "-o", "jsonpath={.items[*].message}")
					if !strings.Contains(out, ns+"/outside") {
						return fmt.Errorf("events: %q", out)
					}
					return nil
				})
			}
			// Nothing of it applied: no address outside A's ranges in any
			// imported slice, and echo still served, alone.
			out := kubectlOut(t, ctx, l, b, "get", "endpointslices", "-A", "-l", mcsv1beta1.LabelSourceCluster+"="+a.ClusterID,
				"-o", "jsonpath={.items[*].endpoints[*].addresses[*]}")
			for _, bad := range []string{"8.8.8.8", "169.254.169.254", b.NodeIP().String()} {
				if strings.Contains(" "+out+" ", " "+bad+" ") {
					t.Errorf("B imported the endpoint %s: %s", bad, out)
				}
			}
			eventually(t, ctx, "B still calls A's echo, its only import", serving)
		})
	}
}

// exportedSet reads the services cluster n sends the peer peerID, as its
// controller wrote them for its gateway.
func exportedSet(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) []mcs.Service {
	t.Helper()
	c, err := l.Client(n)
	if err != nil {
		t.Fatal(err)
	}
	var set mcs.Set
	eventually(t, ctx, "the export set of "+n.Name, func() error {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, types.NamespacedName{Namespace: generators.TenantNamespace(peerID), Name: mcs.ExportsConfigMap}, &cm); err != nil {
			return err
		}
		set, _, err = mcs.Decode(cm.BinaryData[mcs.DataKey], mcs.DefaultLimits)
		if err == nil && len(set) == 0 {
			err = errors.New("empty")
		}
		return err
	})
	return set.Sorted()
}

// dial opens a TCP connection from the gateway pod's network namespace,
// from address from.
func (g *hostileGateway) dial(from netip.Addr, to netip.AddrPort) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread is never unlocked: it ends with the goroutine and
		// is not reused in the pod's namespace. The socket stays there.
		runtime.LockOSThread()
		h, err := vnetns.GetFromPid(g.pid)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer h.Close()
		if err := vnetns.Set(h); err != nil {
			ch <- result{err: err}
			return
		}
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0))}
		c, err := d.Dial("tcp", to.String())
		ch <- result{c, err}
	}()
	r := <-ch
	return r.conn, r.err
}

// frame is v as one frame of the exchange: a 4-byte length and JSON.
func frame(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// cloneBytes copies b, so that appending to the copy leaves b alone.
func cloneBytes(b []byte) []byte { return append([]byte(nil), b...) }

const (
	refusedMetric  = "peerlink_gateway_service_exchange_refused_total"
	residentMemory = "process_resident_memory_bytes"
)

// gatewayMetrics reads the metrics of cluster n's gateway for peerID, by
// name and labels as exposed.
func gatewayMetrics(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) map[string]float64 {
	t.Helper()
	ns := generators.TenantNamespace(peerID)
	pod := strings.TrimSpace(string(mustKubectl(t, ctx, l, n, "-n", ns, "get", "pods",
		"-l", "networking.liqo.io/active=true", "-o", "jsonpath={.items[0].metadata.name}")))
	out, err := l.Kubectl(ctx, n, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:8082/proxy/metrics", ns, pod))
	if err != nil {
		t.Fatalf("metrics of the gateway of %s: %v", n.Name, err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// peakMemory keeps the highest resident memory a gateway reported.
type peakMemory struct {
	mu  sync.Mutex
	max float64
}

func (p *peakMemory) peak() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max
}

// sample reads the resident memory of n's gateway for peerID until the
// returned function is called.
func (p *peakMemory) sample(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, peerID string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	ns := generators.TenantNamespace(peerID)
	pod := strings.TrimSpace(string(mustKubectl(t, ctx, l, n, "-n", ns, "get", "pods",
		"-l", "networking.liqo.io/active=true", "-o", "jsonpath={.items[0].metadata.name}")))
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			out, err := l.Kubectl(ctx, n, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:8082/proxy/metrics", ns, pod))
			if err == nil {
				for _, line := range strings.Split(string(out), "\n") {
					if v, ok := strings.CutPrefix(line, residentMemory+" "); ok {
						if f, err := strconv.ParseFloat(v, 64); err == nil {
							p.mu.Lock()
							p.max = max(p.max, f)
							p.mu.Unlock()
						}
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
