package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	gwreconciler "github.com/peerlink/peerlink/reconciler/gateway"
)

// maxMovePause bounds the time without an answer while the server's node
// port moves: the server announces the new port through the tunnel at its
// next health ping (every second), the client sends there from its next
// plan, and the previous port answers meanwhile, so nothing need be lost;
// the bound leaves room for a busy machine.
const maxMovePause = 5 * time.Second

// TestEndpointMoves peers client a with server b through a NodePort
// Service, with a request every 50 ms both ways, and moves the server's
// node port (spec.endpoint.nodePort of b's GatewayServer) while peered.
// No file is exchanged: a's GatewayClient keeps naming the former port.
// The client must follow the server to the new port, traffic must pause
// at most maxMovePause, and it must keep flowing once the former port is
// gone from b's Service (its grace ended). A new client gateway pod,
// whose GatewayClient still names the former port, must find the server
// at the new one.
func TestEndpointMoves(t *testing.T) {
	sideBySide(t)
	ctx, l := newLabWith(t, 15*time.Minute, labctl.Options{Names: []string{"mv-a", "mv-b"}})
	a, b := l.Clusters[0], l.Clusters[1]
	if out, err := l.Connect(ctx, a, b, "--server-service-type", "NodePort"); err != nil {
		t.Fatalf("connect: %v\n%s", err, out)
	}
	waitConnected(t, ctx, l, a, b)
	probes := []struct {
		n, peer *cluster.Cluster
		name    string
	}{{a, b, "mv-probe-a"}, {b, a, "mv-probe-b"}}
	for _, p := range probes {
		startProbe(t, ctx, l, p.n, p.peer, p.name, haProbeInterval, labctl.ProbeTimeout, 10*time.Minute)
	}

	cb, err := l.Client(b)
	if err != nil {
		t.Fatal(err)
	}
	var servers netv1beta1.GatewayServerList
	listOfPeer(t, ctx, cb, a, &servers)
	if len(servers.Items) != 1 || servers.Items[0].Status.Endpoint == nil {
		t.Fatalf("cluster %s: %d GatewayServers for %s, want one with an endpoint", b.Name, len(servers.Items), a.Name)
	}
	gs := servers.Items[0]
	former := gs.Status.Endpoint.Port
	moved := freeNodePort(t, ctx, cb, former)
	start := time.Now()
	patch := fmt.Appendf(nil, `{"spec":{"endpoint":{"nodePort":%d}}}`, moved)
	if err := cb.Patch(ctx, &gs, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("move GatewayServer %s/%s to node port %d: %v", gs.Namespace, gs.Name, moved, err)
	}
	t.Logf("GatewayServer %s/%s: node port %d -> %d", gs.Namespace, gs.Name, former, moved)

	waitFor(t, ctx, time.Minute, fmt.Sprintf("cluster %s's client follows the server to port %d", a.Name, moved), func() error {
		conn, err := l.Connection(ctx, a, b)
		if err != nil || conn == nil {
			return fmt.Errorf("no Connection: %v", err)
		}
		v := conn.Annotations[netv1beta1.FollowedEndpointAnnotation]
		if followed, err := netv1beta1.ParseFollowedEndpoint(v); err != nil || int32(followed.Port) != moved || int32(followed.Over.Port) != former {
			return fmt.Errorf("annotation %s=%q", netv1beta1.FollowedEndpointAnnotation, v)
		}
		return nil
	})
	t.Logf("the client follows the server to port %d, %.1fs after the move", moved, time.Since(start).Seconds())
	svcName := netv1beta1.GatewayObjectPrefix + gs.Name
	svc := &corev1.Service{}
	if err := cb.Get(ctx, client.ObjectKey{Namespace: gs.Namespace, Name: svcName}, svc); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.NodePort == former }) ||
		svc.Annotations[gwreconciler.PreviousPortAnnotation] == "" {
		t.Errorf("Service %s/%s within the grace: ports %+v, annotations %v; want the former node port %d kept", svc.Namespace, svc.Name, svc.Spec.Ports, svc.Annotations, former)
	}
	time.Sleep(haWatch)

	// The grace ends now: the former port goes, and stays gone.
	if out, err := l.Kubectl(ctx, b, "-n", gs.Namespace, "patch", "service", svcName, "--type=json", "-p",
		`[{"op":"remove","path":"/spec/ports/1"},{"op":"remove","path":"/metadata/annotations/peerlink.io~1previous-port"}]`); err != nil {
		t.Fatalf("remove the former port: %v\n%s", err, out)
	}
	time.Sleep(haWatch)
	if err := cb.Get(ctx, client.ObjectKey{Namespace: gs.Namespace, Name: svcName}, svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].NodePort != moved {
		t.Fatalf("Service %s/%s after its grace: ports %+v, want node port %d alone", svc.Namespace, svc.Name, svc.Spec.Ports, moved)
	}
	end := time.Now()
	for _, p := range probes {
		sent, failed := failedRequests(t, ctx, l, p.n, p.name, start, end)
		res, err := l.ProbeResults(ctx, p.n, p.name)
		if err != nil {
			t.Fatal(err)
		}
		gap := labctl.LongestGap(res, start, end)
		t.Logf("%s -> %s across the move: %d of %d requests failed, longest pause %.2fs", p.n.Name, p.peer.Name, failed, sent, gap.Seconds())
		if gap > maxMovePause {
			t.Errorf("%s -> %s went %.2fs without an answer across the move, want at most %v", p.n.Name, p.peer.Name, gap.Seconds(), maxMovePause)
		}
	}

	// A new client gateway pod: its GatewayClient names the former port
	// alone; it sends where the last one followed.
	ca, err := l.Client(a)
	if err != nil {
		t.Fatal(err)
	}
	var clients netv1beta1.GatewayClientList
	listOfPeer(t, ctx, ca, b, &clients)
	if len(clients.Items) != 1 || clients.Items[0].Spec.Endpoint.Resolved().Port != former {
		t.Fatalf("cluster %s: GatewayClients %+v, want one still naming port %d: no file was exchanged", a.Name, clients.Items, former)
	}
	gc := clients.Items[0]
	var pods corev1.PodList
	if err := ca.List(ctx, &pods, client.InNamespace(gc.Namespace), client.MatchingLabels{netv1beta1.GatewayNameLabel: gc.Name}); err != nil || len(pods.Items) == 0 {
		t.Fatalf("cluster %s: the pods of gateway %s/%s: %d, %v", a.Name, gc.Namespace, gc.Name, len(pods.Items), err)
	}
	restart := time.Now()
	for _, pod := range pods.Items {
		if err := ca.Delete(ctx, &pod); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, 2*time.Minute, "the former client gateway pods gone", func() error {
		for _, pod := range pods.Items {
			if err := ca.Get(ctx, client.ObjectKeyFromObject(&pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("pod %s: %v", pod.Name, err)
			}
		}
		return nil
	})
	waitConnected(t, ctx, l, a, b)
	for _, p := range probes {
		waitAnswered(t, ctx, l, p.n, p.name)
	}
	t.Logf("a new client gateway pod reached the server at port %d in %.1fs", moved, time.Since(restart).Seconds())
}

// freeNodePort returns a node port next to from that no Service of the
// cluster of c holds.
func freeNodePort(t *testing.T, ctx context.Context, c client.Client, from int32) int32 {
	t.Helper()
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		t.Fatal(err)
	}
	used := map[int32]bool{}
	for _, s := range svcs.Items {
		for _, p := range s.Spec.Ports {
			used[p.NodePort] = true
		}
	}
	for i := int32(1); i < 2768; i++ {
		if p := 30000 + (from-30000+i)%2768; !used[p] {
			return p
		}
	}
	t.Fatal("no free node port")
	return 0
}
