package fabric

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/resync"
)

func gatewayPod(ns, name, cluster, node, podIP, hostIP string, created time.Time) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: cluster}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP, HostIP: hostIP},
	}
}

// asGateway makes p run as the ServiceAccount of gateway name.
func asGateway(p corev1.Pod, name string) corev1.Pod {
	p.Spec.ServiceAccountName = netv1beta1.GatewayObjectPrefix + name
	return p
}

// deleting marks p as being deleted.
func deleting(p corev1.Pod) corev1.Pod {
	p.DeletionTimestamp = &p.CreationTimestamp
	return p
}

func configuration(ns, cluster string, remapped ...netv1beta1.CIDR) netv1beta1.Configuration {
	c := netv1beta1.Configuration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster,
		Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: cluster}}}
	if len(remapped) > 0 {
		c.Status.Remote = &netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{Pod: remapped[:1], External: remapped[1:]}}
	}
	return c
}

func TestGateways(t *testing.T) {
	a := &Agent{opts: Options{NodeName: "node-1"}, log: logr.Discard(), trigger: resync.NewTrigger()}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pods := []corev1.Pod{
		gatewayPod("t-b", "gw-b-new", "b", "node-2", "10.244.2.9", "192.168.1.2", t0.Add(time.Minute)),
		gatewayPod("t-b", "gw-b-old", "b", "node-1", "10.244.1.9", "192.168.1.1", t0),
		// Older, with the labels, but not the pod the controller chose.
		gatewayPod("t-b", "impostor", "b", "node-1", "10.244.1.66", "192.168.1.1", t0.Add(-time.Hour)),
		gatewayPod("t-c", "gw-c", "c", "node-2", "10.244.2.10", "192.168.1.2", t0),
		gatewayPod("t-d", "gw-d", "d", "node-2", "", "", t0),
		// e: the controller is stopped. Its published pod is being
		// deleted, the replica that took over runs as the gateway's
		// account; a newer impostor does not, an older replica of the
		// gateway is being deleted too.
		deleting(asGateway(gatewayPod("t-e", "gw-e-gone", "e", "node-1", "10.244.1.20", "192.168.1.1", t0), "e")),
		asGateway(gatewayPod("t-e", "gw-e-standby", "e", "node-2", "10.244.2.20", "192.168.1.2", t0.Add(2*time.Minute)), "e"),
		gatewayPod("t-e", "impostor", "e", "node-1", "10.244.1.67", "192.168.1.1", t0.Add(time.Hour)),
		deleting(asGateway(gatewayPod("t-e", "gw-e-older", "e", "node-1", "10.244.1.21", "192.168.1.1", t0.Add(-time.Hour)), "e")),
		// f: no controller record at all; a pod with a gateway's account
		// but not f's gateway's does not count.
		asGateway(gatewayPod("t-f", "gw-f", "f", "node-2", "10.244.2.30", "192.168.1.2", t0), "other"),
	}
	confs := []netv1beta1.Configuration{
		configuration("t-b", "b", "10.71.0.0/16", "10.72.0.0/16"),
		configuration("t-c", "c"),
		configuration("elsewhere", "c", "10.99.0.0/16"),
		configuration("t-d", "d", "10.75.0.0/16"),
		configuration("t-e", "e", "10.76.0.0/16"),
		configuration("t-f", "f", "10.77.0.0/16"),
	}
	endpoint := func(ip, node string) netv1beta1.InternalGatewayEndpoint {
		addr := netv1beta1.IP(ip)
		return netv1beta1.InternalGatewayEndpoint{IP: &addr, Node: &node}
	}
	published := func(ip, node string) gatewayRecord {
		ep := endpoint(ip, node)
		return gatewayRecord{published: &ep}
	}
	records := map[peerKey]gatewayRecord{
		{"t-b", "b"}: published("10.244.2.9", "node-2"),
		{"t-c", "c"}: published("10.244.2.10", "node-2"),
		// The controller's choice for d has no address on its pod yet.
		{"t-d", "d"}: published("10.244.2.11", "node-2"),
		{"t-e", "e"}: {published: published("10.244.1.20", "node-1").published, account: netv1beta1.GatewayObjectPrefix + "e"},
	}
	got := a.gateways(pods, confs, records)
	if len(got) != 6 {
		t.Fatalf("gateways = %+v, want b, c, e, and the peers without a gateway pod with an address", got)
	}
	// The pods come in creation order: c's, then b's newer one, then e's.
	c, b, e := got[0], got[1], got[2]
	if e.Name != "t-e/gw-e-standby" || e.Address != netip.MustParseAddr("10.244.2.20") || len(e.Ranges) != 1 {
		t.Errorf("peer e: %+v, want the replica that took over, running as the gateway's account", e)
	}
	if b.Name != "t-b/gw-b-new" || b.Local || b.Address != netip.MustParseAddr("10.244.2.9") || b.Node != netip.MustParseAddr("192.168.1.2") {
		t.Errorf("peer b: %+v, want the pod the controller published, on node-2", b)
	}
	if len(b.Ranges) != 2 || b.Ranges[0].String() != "10.71.0.0/16" || b.Ranges[1].String() != "10.72.0.0/16" {
		t.Errorf("peer b ranges %v", b.Ranges)
	}
	if c.Local || len(c.Ranges) != 0 {
		t.Errorf("peer c: %+v, want remote and no ranges (its Configuration in its namespace is not remapped)", c)
	}
	// Without a pod with an address, a remapped peer's ranges are still
	// known, so that the node rejects them instead of routing them out.
	for i, want := range []struct{ name, rng string }{{"elsewhere/c", "10.99.0.0/16"}, {"t-d/d", "10.75.0.0/16"}, {"t-f/f", "10.77.0.0/16"}} {
		g := got[3+i]
		if g.Name != want.name || g.Address.IsValid() || g.HandingOver || len(g.Ranges) != 1 || g.Ranges[0].String() != want.rng {
			t.Errorf("peer %s: %+v, want no address, not handing over (it never had a pod), and range %s", want.name, g, want.rng)
		}
	}

	// b's pods go: a hand-over, until HandOverGrace after they went.
	withoutB := slices.DeleteFunc(slices.Clone(pods), func(p corev1.Pod) bool { return p.Namespace == "t-b" })
	handingOver := func() bool {
		for _, g := range a.gateways(withoutB, confs, records) {
			if g.Name == "t-b/b" {
				if g.Address.IsValid() {
					t.Fatalf("peer b without its pods: %+v", g)
				}
				return g.HandingOver
			}
		}
		t.Fatal("peer b without its pods is not planned")
		return false
	}
	if !handingOver() {
		t.Error("peer b just lost its active pod: not handing over")
	}
	if !handingOver() {
		t.Error("peer b lost its active pod moments ago, twice planned: not handing over")
	}
	a.lastActive[peerKey{"t-b", "b"}] = time.Now().Add(-dataplane.HandOverGrace)
	if handingOver() {
		t.Error("peer b lost its active pod HandOverGrace ago: still handing over")
	}
	if len(a.lastActive) != 2 {
		t.Errorf("last active times kept for %v, want c's and e's only", a.lastActive)
	}
}

func TestOptionsValidate(t *testing.T) {
	err := Options{AgentOptions: dataplane.AgentOptions{Namespace: "peerlink", ResyncInterval: time.Second}}.Validate()
	for _, want := range []string{"NodeName: required", "NodeIP: required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}
