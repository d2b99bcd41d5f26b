package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/echoapi"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// TestIPRemap peers two clusters and puts a host outside the second one on
// its node network: a network namespace of its own, not a node, not a pod,
// with an HTTP server. An IP object of the second cluster remaps the host
// into its external CIDR; a pod of the first cluster reaches the host at
// its view of that address, and the host sees the pod as the second
// cluster sees it (it routes that back to the gateway's node). A second
// host, without that route, is reached through an IP that asks for
// masquerade, and sees the gateway's node as the caller. An address of the
// external CIDR without an IP object is dropped by the gateway's ingress
// filter, and so is the first host's once its IP object is deleted.
func TestIPRemap(t *testing.T) {
	sideBySide(t)
	ctx, l := newPeeredLab(t, 15*time.Minute, "ip-a", "ip-b")
	a, b := l.Clusters[0], l.Clusters[1]
	from := echoPods(t, ctx, l, a)[0]

	host := netip.AddrFrom4([4]byte{172, 30, byte(b.Index), 200})
	ns := startOutsideHost(t, b, "outside-host", host)
	// Without masquerading the host sees the peer's pod under the address
	// its cluster gives it, and routes it back through the gateway's node.
	seenAs, err := l.RemappedIP(ctx, b, a, from.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gatewayPod(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "ip", "route", "add", seenAs.String()+"/32", "via", gw.Status.HostIP)

	applyManifests(t, ctx, l, b, []string{ipManifest("outside-host", host, false)})
	url := func(a netip.Addr) string { return fmt.Sprintf("http://%s:%d/", a, labctl.EchoPort) }
	remapped := waitRemappedIP(t, ctx, l, b, "outside-host")
	view := externalAddrView(t, ctx, l, a, b, remapped)
	t.Logf("%s remapped %s to %s, which %s reaches at %s", b.Name, host, remapped, a.Name, view)
	checkNodeGet(t, ctx, a.Name+" pod "+from.Name, seenAs, []string{"outside-host"}, func() (echoapi.Reply, error) {
		got, err := l.EchoGet(ctx, a, from.Name, url(view))
		return got.Reply, err
	})

	masqHost := netip.AddrFrom4([4]byte{172, 30, byte(b.Index), 201})
	startOutsideHost(t, b, "masqueraded-host", masqHost)
	applyManifests(t, ctx, l, b, []string{ipManifest("masqueraded-host", masqHost, true)})
	masqRemapped := waitRemappedIP(t, ctx, l, b, "masqueraded-host")
	gwNode := netip.MustParseAddr(gw.Status.HostIP)
	checkNodeGet(t, ctx, a.Name+" pod "+from.Name, gwNode, []string{"masqueraded-host"}, func() (echoapi.Reply, error) {
		got, err := l.EchoGet(ctx, a, from.Name, url(externalAddrView(t, ctx, l, a, b, masqRemapped)))
		return got.Reply, err
	})

	// The address after both has no IP object.
	highest := remapped
	if masqRemapped.Compare(highest) > 0 {
		highest = masqRemapped
	}
	other := externalAddrView(t, ctx, l, a, b, highest.Next())
	before := ingressDrops(t, ctx, l, b, a.ClusterID)
	if got, err := l.EchoGet(ctx, a, from.Name, url(other)); err == nil {
		t.Fatalf("%s reached %s, an address of %s's external CIDR without an IP: answered by %s", a.Name, other, b.Name, got.Reply.Pod)
	}
	after := ingressDrops(t, ctx, l, b, a.ClusterID)
	if d := after[`{reason="destination"}`] - before[`{reason="destination"}`]; d < 1 {
		t.Errorf("the gateway of %s dropped %v packets for a destination, want at least one (drops before %v, after %v)", b.Name, d, before, after)
	}

	mustKubectl(t, ctx, l, b, "delete", "ips.ipam.liqo.io", "-n", "default", "outside-host")
	eventually(t, ctx, "the host is unreachable once its IP is deleted", func() error {
		if got, err := l.EchoGet(ctx, a, from.Name, url(view)); err == nil {
			return fmt.Errorf("still answered by %s", got.Reply.Pod)
		}
		return nil
	})
}

// ipManifest is an IP object of namespace default remapping local.
func ipManifest(name string, local netip.Addr, masquerade bool) string {
	return fmt.Sprintf(`apiVersion: ipam.liqo.io/v1alpha1
kind: IP
metadata:
  name: %s
  namespace: default
spec:
  ip: %s
  masquerade: %t
`, name, local, masquerade)
}

// waitRemappedIP waits for the IP default/name of cluster n to get its
// address, and returns it.
func waitRemappedIP(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, name string) netip.Addr {
	t.Helper()
	var remapped netip.Addr
	eventually(t, ctx, "the IP "+name+" gets an address", func() error {
		s := kubectlOut(t, ctx, l, n, "get", "ips.ipam.liqo.io", "-n", "default", name, "-o", "jsonpath={.status.ip}")
		var err error
		remapped, err = netip.ParseAddr(s)
		return err
	})
	return remapped
}

// startOutsideHost makes a network namespace on n's node network, at addr,
// that is neither a node nor a pod of n, and serves there the echo API on
// labctl.EchoPort, answering as name. It is removed at the end of the test.
func startOutsideHost(t *testing.T, n *cluster.Cluster, name string, addr netip.Addr) *netns.NS {
	t.Helper()
	last := addr.As4()[3]
	pair := netns.Pair{
		Namespace: fmt.Sprintf("peerlink-lab-outside-%d-%d", n.Index, last),
		HostIf:    fmt.Sprintf("plout%d-%d", n.Index, last),
		HostAddr:  netip.PrefixFrom(cluster.HostIP(n.Index), 24),
		NodeAddr:  netip.PrefixFrom(addr, 24),
		Bridge:    n.BridgeName(),
	}
	_ = pair.Delete()
	if err := pair.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pair.Delete(); err != nil {
			t.Errorf("remove the outside host: %v", err)
		}
	})
	ns := nodeNS(t, nsName(pair.Namespace))
	var ln net.Listener
	if err := ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", labctl.EchoPort))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(echoapi.Reply{Pod: name, PodIP: addr.String(), Client: r.RemoteAddr})
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	if out := ns.MustRun(t, "ip", "-brief", "addr", "show", "eth0"); !strings.Contains(out, addr.String()) {
		t.Fatalf("outside host: eth0 has not %s: %s", addr, out)
	}
	return ns
}

// nsName is a network namespace's name, as nodeNS takes it.
type nsName string

func (n nsName) Namespace() string { return string(n) }
