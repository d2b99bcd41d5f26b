package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/kube"
	"github.com/peerlink/peerlink/lab/internal/addons"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestOneCommand is the path of an admin holding both kubeconfigs: connect
// with the defaults, so through a LoadBalancer gateway Service (MetalLB in
// the clusters), traffic both ways with each side seeing the other under its
// remapped addresses, disconnect (traffic stops, Configurations stay), reset
// (nothing of the peering is left).
func TestOneCommand(t *testing.T) {
	sideBySide(t)
	ctx, l := newPeeredLabWith(t, 10*time.Minute, labctl.Options{Names: []string{"one-a", "one-b"}, LoadBalancer: labctl.MetalLB})
	a, b := l.Clusters[0], l.Clusters[1]
	podsA, podsB := checkPeered(t, ctx, l, a, b)
	// The clusters of this test are the lab's only ones with a load
	// balancer: the default Service type's path is checked on them rather
	// than on a pair of its own.
	t.Run("TestLoadBalancerGateway", func(t *testing.T) {
		checkLoadBalancerGateway(t, ctx, l, a, b, podsA, podsB)
	})
	checkVersions(t, ctx, l, a)

	// Both clusters use one pod range, so a pod of one has, sooner or
	// later, the address of the other's gateway pod: traffic must flow
	// both ways for it too. A new gateway pod of b gets an address a hands
	// out soon.
	old, err := gatewayPod(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := deleteGatewayPods(l, b)(ctx); err != nil {
		t.Fatal(err)
	}
	var gw corev1.Pod
	eventually(t, ctx, "a new gateway pod in "+b.ClusterID, func() error {
		var err error
		if gw, err = gatewayPod(ctx, b); err != nil {
			return err
		}
		if gw.Name == old.Name || !kube.PodReady(&gw) {
			return fmt.Errorf("%s not ready yet", gw.Name)
		}
		return nil
	})
	waitConnected(t, ctx, l, a, b)
	twin := echoPodWithIP(t, ctx, l, a, gw.Status.PodIP)
	t.Logf("%s pod %s has the address of the gateway pod %s of %s", a.ClusterID, twin.Name, gw.Name, b.ClusterID)
	checkTraffic(t, ctx, l, a, twin, b, podsB[0])
	checkTraffic(t, ctx, l, b, podsB[0], a, twin)

	peerlink(t, ctx, l, "network", "disconnect", "--skip-confirm", "--kubeconfig", a.Kubeconfig(), "--remote-kubeconfig", b.Kubeconfig())
	eventually(t, ctx, "traffic stops after disconnect", func() error {
		if got, err := l.Reach(ctx, a, podsA[0], b, podsB[0]); err == nil {
			return fmt.Errorf("%s still reaches %s: %+v", a.ClusterID, b.ClusterID, got)
		}
		return nil
	})
	for _, side := range [][2]*cluster.Cluster{{a, b}, {b, a}} {
		if _, _, err := l.PodCIDRView(ctx, side[0], side[1]); err != nil {
			t.Errorf("after disconnect the Configurations should stay: %v", err)
		}
		// The gateways' children go by garbage collection, just after.
		eventually(t, ctx, "cluster "+side[0].ClusterID+" has no gateway after disconnect", func() error {
			if left := peeringObjects(t, ctx, l, side[0], side[1], gatewayKinds()); len(left) > 0 {
				return fmt.Errorf("left: %v", left)
			}
			return nil
		})
	}

	peerlink(t, ctx, l, "network", "reset", "--skip-confirm", "--kubeconfig", a.Kubeconfig(), "--remote-kubeconfig", b.Kubeconfig())
	for _, side := range [][2]*cluster.Cluster{{a, b}, {b, a}} {
		eventually(t, ctx, "cluster "+side[0].ClusterID+" has nothing of the peering after reset", func() error {
			if left := peeringObjects(t, ctx, l, side[0], side[1], append(gatewayKinds(), "configurations")); len(left) > 0 {
				return fmt.Errorf("left: %v", left)
			}
			return nil
		})
	}
}

// checkLoadBalancerGateway checks the path of the gateway server's default
// Service type, with client a and server b peered by network connect
// without --gw-server-service-type: b's gateway Service is a LoadBalancer
// that got an address of b's pool from MetalLB, the server publishes that
// address, a's GatewayClient connects to it, both sides are Connected and
// traffic flows both ways.
func checkLoadBalancerGateway(t *testing.T, ctx context.Context, l *labctl.Lab, a, b *cluster.Cluster, podsA, podsB []corev1.Pod) {
	cb, err := l.Client(b)
	if err != nil {
		t.Fatal(err)
	}
	var servers netv1beta1.GatewayServerList
	listOfPeer(t, ctx, cb, a, &servers)
	if len(servers.Items) != 1 {
		t.Fatalf("cluster %s: %d GatewayServers for %s, want one", b.ClusterID, len(servers.Items), a.ClusterID)
	}
	gs := servers.Items[0]
	if gs.Spec.Endpoint.ServiceType != corev1.ServiceTypeLoadBalancer {
		t.Errorf("GatewayServer %s/%s: spec.endpoint.serviceType %q, want the default %q",
			gs.Namespace, gs.Name, gs.Spec.Endpoint.ServiceType, corev1.ServiceTypeLoadBalancer)
	}
	var svcs corev1.ServiceList
	if err := cb.List(ctx, &svcs, client.InNamespace(gs.Namespace)); err != nil {
		t.Fatal(err)
	}
	var svc *corev1.Service
	for i, s := range svcs.Items {
		if strings.HasPrefix(s.Name, netv1beta1.GatewayObjectPrefix) {
			if svc != nil {
				t.Fatalf("cluster %s: gateway Services %s and %s in %s, want one", b.ClusterID, svc.Name, s.Name, gs.Namespace)
			}
			svc = &svcs.Items[i]
		}
	}
	if svc == nil {
		t.Fatalf("cluster %s: no gateway Service in %s", b.ClusterID, gs.Namespace)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("Service %s/%s is of type %s, want %s", svc.Namespace, svc.Name, svc.Spec.Type, corev1.ServiceTypeLoadBalancer)
	}
	if len(svc.Status.LoadBalancer.Ingress) != 1 {
		t.Fatalf("Service %s/%s: load balancer ingress %+v, want one address", svc.Namespace, svc.Name, svc.Status.LoadBalancer.Ingress)
	}
	ip, err := netip.ParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
	if err != nil {
		t.Fatalf("Service %s/%s: load balancer ingress: %v", svc.Namespace, svc.Name, err)
	}
	first, last := b.LoadBalancerRange()
	if ip.Less(first) || last.Less(ip) {
		t.Errorf("Service %s/%s got %s, outside the pool %s-%s", svc.Namespace, svc.Name, ip, first, last)
	}
	if pool := svc.Annotations[metalLBPoolAnnotation]; pool != addons.MetalLBPoolName {
		t.Errorf("Service %s/%s: %s=%q, want the lab's pool %q", svc.Namespace, svc.Name, metalLBPoolAnnotation, pool, addons.MetalLBPoolName)
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service %s/%s: ports %+v, want one", svc.Namespace, svc.Name, svc.Spec.Ports)
	}
	port := svc.Spec.Ports[0].Port
	t.Logf("cluster %s: gateway Service %s/%s of type %s at %s:%d/%s (from pool %s, %s-%s)", b.ClusterID, svc.Namespace, svc.Name,
		svc.Spec.Type, ip, port, svc.Spec.Ports[0].Protocol, addons.MetalLBPoolName, first, last)
	// The address is announced on b's node network as bare metal
	// announces it: the host, the router between the clusters, learnt it
	// at the MAC address of b's node, whose speaker answered its ARP query.
	eventually(t, ctx, fmt.Sprintf("the host resolves %s on %s to the node %s", ip, b.BridgeName(), b.ControlPlane().Name()), func() error {
		node, err := fieldAfter(ctx, "link/ether", "ip", "-n", b.Namespace(), "-o", "link", "show", "eth0")
		if err != nil {
			return err
		}
		host, err := fieldAfter(ctx, "lladdr", "ip", "neigh", "show", ip.String(), "dev", b.BridgeName())
		if err != nil {
			return err
		}
		if host != node {
			return fmt.Errorf("the host has %s at %s, the node's eth0 is %s", ip, host, node)
		}
		return nil
	})
	if ep := gs.Status.Endpoint; ep == nil || !slices.Equal(ep.Addresses, []string{ip.String()}) || ep.Port != port {
		t.Errorf("GatewayServer %s/%s publishes the endpoint %+v, want %s:%d", gs.Namespace, gs.Name, ep, ip, port)
	}

	ca, err := l.Client(a)
	if err != nil {
		t.Fatal(err)
	}
	var clients netv1beta1.GatewayClientList
	listOfPeer(t, ctx, ca, b, &clients)
	if len(clients.Items) != 1 {
		t.Fatalf("cluster %s: %d GatewayClients for %s, want one", a.ClusterID, len(clients.Items), b.ClusterID)
	}
	gc := clients.Items[0]
	if ep := gc.Spec.Endpoint; !slices.Equal(ep.Addresses, []string{ip.String()}) || ep.Port != port {
		t.Errorf("GatewayClient %s/%s connects to %v:%d, want the load balancer's %s:%d", gc.Namespace, gc.Name, ep.Addresses, ep.Port, ip, port)
	}
	for _, side := range [][2]*cluster.Cluster{{a, b}, {b, a}} {
		if st, err := l.ConnectionState(ctx, side[0], side[1]); err != nil || st != netv1beta1.Connected {
			t.Errorf("cluster %s: Connection to %s is %q (%v), want %s", side[0].ClusterID, side[1].ClusterID, st, err, netv1beta1.Connected)
		}
	}
	checkTraffic(t, ctx, l, a, podsA[0], b, podsB[0])
	checkTraffic(t, ctx, l, b, podsB[1], a, podsA[1])
}

// fieldAfter runs a command and returns the word of its output that follows
// key.
func fieldAfter(ctx context.Context, key string, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	f := strings.Fields(string(out))
	if i := slices.Index(f, key); i >= 0 && i+1 < len(f) {
		return f[i+1], nil
	}
	return "", fmt.Errorf("%s %s: no %s in %q", name, strings.Join(args, " "), key, out)
}

// metalLBPoolAnnotation is where MetalLB names the pool a Service's address
// comes from.
const metalLBPoolAnnotation = "metallb.io/ip-allocated-from-pool"

// gatewayPod returns the gateway pod of cluster n that has an address and
// is not being deleted.
func gatewayPod(ctx context.Context, n *cluster.Cluster) (corev1.Pod, error) {
	cs, err := n.Clientset()
	if err != nil {
		return corev1.Pod{}, err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: netv1beta1.ActiveGatewayLabel})
	if err != nil {
		return corev1.Pod{}, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return corev1.Pod{}, fmt.Errorf("cluster %s: want one gateway pod with an address, got %d", n.ClusterID, len(live))
	}
	return live[0], nil
}

// echoPodWithIP starts echo pods in cluster n until one gets the address
// ip (the bridge plugin hands addresses out in turn), deletes the others,
// and returns that one.
func echoPodWithIP(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, ip string) corev1.Pod {
	t.Helper()
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	const tries = 20
	for i := range tries {
		name := fmt.Sprintf("twin-%d", i)
		pod := startEchoPod(t, ctx, l, n, name, "")
		if pod.Status.PodIP == ip {
			return *pod
		}
		if err := cs.CoreV1().Pods(labctl.EchoNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("cluster %s: no pod got address %s in %d tries", n.ClusterID, ip, tries)
	return corev1.Pod{}
}

// startEchoPod starts the echo pod name in cluster n, on node (any node
// when empty), and waits until it is ready with an address.
func startEchoPod(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, name, node string) *corev1.Pod {
	t.Helper()
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StartEcho(ctx, n, name, node); err != nil {
		t.Fatal(err)
	}
	what := fmt.Sprintf("%s: pod %s running", n.ClusterID, name)
	if node != "" {
		what += " on " + node
	}
	var pod *corev1.Pod
	eventually(t, ctx, what, func() error {
		pod, err = cs.CoreV1().Pods(labctl.EchoNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Status.PodIP == "" || !kube.PodReady(pod) {
			return fmt.Errorf("not ready yet")
		}
		return nil
	})
	return pod
}

// peerlink runs the CLI and fails the test when it fails.
func peerlink(t *testing.T, ctx context.Context, l *labctl.Lab, args ...string) []byte {
	t.Helper()
	out, err := l.Peerlink(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitConnected waits until both sides report Connected and logs how long
// that took.
func waitConnected(t *testing.T, ctx context.Context, l *labctl.Lab, a, b *cluster.Cluster) {
	t.Helper()
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := l.WaitConnected(wctx, a, b); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s and %s Connected after %.1fs of waiting", a.ClusterID, b.ClusterID, time.Since(start).Seconds())
}

// checkPeered waits until a and b are Connected and checks traffic both
// ways between their echo pods, which it returns.
func checkPeered(t *testing.T, ctx context.Context, l *labctl.Lab, a, b *cluster.Cluster) (podsA, podsB []corev1.Pod) {
	t.Helper()
	waitConnected(t, ctx, l, a, b)
	podsA, podsB = echoPods(t, ctx, l, a), echoPods(t, ctx, l, b)
	checkTraffic(t, ctx, l, a, podsA[0], b, podsB[1])
	checkTraffic(t, ctx, l, b, podsB[0], a, podsA[1])
	return podsA, podsB
}

// checkTraffic sends a request from pod from of cluster src to pod to of
// cluster dst at the address src knows it by, and checks both ends: the
// request reached that very pod, and the pod saw the caller's own address
// remapped into dst's view of src (no masquerading on the way).
func checkTraffic(t *testing.T, ctx context.Context, l *labctl.Lab, src *cluster.Cluster, from corev1.Pod, dst *cluster.Cluster, to corev1.Pod) {
	t.Helper()
	wantClient, err := l.RemappedIP(ctx, dst, src, from.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, fmt.Sprintf("%s/%s reaches %s/%s", src.ClusterID, from.Name, dst.ClusterID, to.Name), func() error {
		got, err := l.Reach(ctx, src, from, dst, to)
		if err != nil {
			return err
		}
		if got.Reply.PodIP != to.Status.PodIP || got.Reply.Pod != to.Name {
			return fmt.Errorf("answered by %s (%s), want %s (%s)", got.Reply.Pod, got.Reply.PodIP, to.Name, to.Status.PodIP)
		}
		host, _, err := net.SplitHostPort(got.Reply.Client)
		if err != nil {
			return err
		}
		if host != wantClient.String() {
			t.Errorf("%s saw the caller %s (%s) as %s, want %s", dst.ClusterID, from.Name, from.Status.PodIP, host, wantClient)
		}
		t.Logf("%s %s -> %s: answered by %s (%s), caller seen as %s", src.ClusterID, from.Status.PodIP, got.URL,
			got.Reply.Pod, got.Reply.PodIP, got.Reply.Client)
		return nil
	})
}

// gatewayKinds are the kinds of the per-peer objects a gateway brings.
func gatewayKinds() []string {
	return []string{"gatewayservers", "gatewayclients", "wggatewayservers", "wggatewayclients",
		"connections", "publickeies", "deployments", "services", "secrets", "serviceaccounts"}
}

// peeringObjects lists the objects of the given kinds that cluster n holds
// for peer: labelled with the peer's cluster ID anywhere, or named gw-* in
// the peer's tenant namespace (children of gateways).
func peeringObjects(t *testing.T, ctx context.Context, l *labctl.Lab, n, peer *cluster.Cluster, kinds []string) []string {
	t.Helper()
	var left []string
	tenant := netv1beta1.TenantNamespacePrefix + peer.ClusterID
	for _, kind := range kinds {
		out, err := l.Kubectl(ctx, n, "get", kind, "-A", "-l", netv1beta1.RemoteClusterIDLabel+"="+peer.ClusterID, "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, strings.Fields(string(out))...)
		out, err = l.Kubectl(ctx, n, "get", kind, "-n", tenant, "-o", "name", "--ignore-not-found")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range strings.Fields(string(out)) {
			if _, obj, _ := strings.Cut(name, "/"); strings.HasPrefix(obj, netv1beta1.GatewayObjectPrefix) {
				left = append(left, tenant+"/"+name)
			}
		}
	}
	return left
}

// checkVersions checks that the controller of cluster n publishes the
// version of the lab's CLI, both built from this tree, so that the CLI
// warns of no difference.
func checkVersions(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster) {
	t.Helper()
	cmd := exec.CommandContext(ctx, l.PeerlinkBin(), "version", "--kubeconfig", n.Kubeconfig(), "-o", "json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("peerlink version: %v: %s", err, stderr.String())
	}
	var v struct {
		Client     struct{ Version, Commit string } `json:"clientVersion"`
		Controller *struct{ Version string }        `json:"controllerVersion"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("peerlink version -o json: %v\n%s", err, out)
	}
	if v.Client.Version == "" || v.Client.Commit == "" || v.Controller == nil || v.Controller.Version != v.Client.Version {
		t.Errorf("cluster %s: peerlink version printed\n%s\nwant the CLI's version and commit, and the same controller version", n.ClusterID, out)
	}
	if stderr.Len() > 0 {
		t.Errorf("cluster %s: peerlink version warned: %s", n.ClusterID, stderr.String())
	}
}

// listOfPeer lists into list the objects of its kind, in every namespace
// of the cluster c reads, that are labelled for peer.
func listOfPeer(t *testing.T, ctx context.Context, c client.Client, peer *cluster.Cluster, list client.ObjectList) {
	t.Helper()
	if err := c.List(ctx, list, client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: peer.ClusterID}); err != nil {
		t.Fatalf("list the objects labelled for %s: %v", peer.Name, err)
	}
}
