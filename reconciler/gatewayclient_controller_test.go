package reconciler

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// waitGatewayClient waits until the GatewayClient ns/name reports, for its
// current generation, the Ready condition status and reason given, and check
// accepts it.
func (e *gatewayEnv) waitGatewayClient(t *testing.T, ns, name string, ready metav1.ConditionStatus, reason string,
	check func(*netv1beta1.GatewayClient) error) *netv1beta1.GatewayClient {
	t.Helper()
	var gw netv1beta1.GatewayClient
	eventually(t, fmt.Sprintf("GatewayClient %s/%s Ready=%s/%s", ns, name, ready, reason), func(ctx context.Context) error {
		if err := e.get(ctx, ns, name, &gw); err != nil {
			return err
		}
		if gw.Status.ObservedGeneration != gw.Generation {
			return fmt.Errorf("status describes generation %d, want %d", gw.Status.ObservedGeneration, gw.Generation)
		}
		if err := conditionIs(gw.Status.Conditions, gw.Generation, netv1beta1.ConditionReady, ready, reason); err != nil {
			return err
		}
		if check != nil {
			return check(&gw)
		}
		return nil
	})
	return &gw
}

func testGatewayClient(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gwc")
	gw := &netv1beta1.GatewayClient{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "client", Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: "remote-c"},
	}}
	if err := e.c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}

	// The server's endpoint is unknown: the keys exist at once all the same,
	// so the public key can go to the peer in the first message.
	e.waitGatewayClient(t, ns, "client", metav1.ConditionFalse, netv1beta1.ReasonWaitingForEndpoint, func(g *netv1beta1.GatewayClient) error {
		if g.Status.SecretRef == nil || g.Status.SecretRef.Name != "gw-client" || g.Status.SecretRef.Namespace != ns {
			return fmt.Errorf("status.secretRef %+v, want gw-client", g.Status.SecretRef)
		}
		want := &corev1.ObjectReference{APIVersion: "networking.liqo.io/v1beta1", Kind: "WgGatewayClient", Name: "client", Namespace: ns}
		if g.Status.ClientRef == nil || *g.Status.ClientRef != *want {
			return fmt.Errorf("status.clientRef %+v, want %+v", g.Status.ClientRef, want)
		}
		return conditionIs(g.Status.Conditions, g.Generation, netv1beta1.ConditionReconciling, metav1.ConditionTrue, netv1beta1.ReasonWaitingForEndpoint)
	})
	e.checkKeySecret(t, ns, "gw-client", "remote-c")
	args, err := e.containerArgs(ctx, ns, "client")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"--mode=client", "--endpoint-address=", "--remote-cluster-id=remote-c", "--gateway-uid=" + string(gw.UID)} {
		if !slices.Contains(args, a) {
			t.Errorf("gateway args %q lack %q", args, a)
		}
	}
	e.checkIdentity(t, ns, "client", "gatewayclients", "gw-client")

	// The peer answers with the endpoint.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.get(ctx, ns, "client", gw); err != nil {
			return err
		}
		gw.Spec.Endpoint.Addresses = []string{"198.51.100.50", "server.example.org"}
		gw.Spec.Endpoint.Port = 30555
		return e.c.Update(ctx, gw)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "deployment with the server's endpoint", func(ctx context.Context) error {
		args, err := e.containerArgs(ctx, ns, "client")
		if err != nil {
			return err
		}
		for _, a := range []string{"--endpoint-address=198.51.100.50,server.example.org", "--endpoint-port=30555"} {
			if !slices.Contains(args, a) {
				return fmt.Errorf("args %q lack %s", args, a)
			}
		}
		return nil
	})
	e.waitGatewayClient(t, ns, "client", metav1.ConditionFalse, ReasonWaitingForGatewayPod, nil)

	e.createNode(t, "node-gwc")
	e.runGatewayPod(t, ns, "client", "node-gwc", "10.244.0.50")
	e.waitGatewayClient(t, ns, "client", metav1.ConditionTrue, ReasonReconciled, func(g *netv1beta1.GatewayClient) error {
		ie := g.Status.InternalEndpoint
		if ie == nil || ie.IP == nil || *ie.IP != "10.244.0.50" || ie.Node == nil || *ie.Node != "node-gwc" {
			return fmt.Errorf("internal endpoint %+v, want 10.244.0.50 on node-gwc", ie)
		}
		return nil
	})
	objs := append(gatewayChildren(ns, "client", false),
		&netv1beta1.WgGatewayClient{ObjectMeta: objectMeta(ns, "client")},
		&netv1beta1.GatewayClient{ObjectMeta: objectMeta(ns, "client")})
	e.checkNoWrites(t, ns, "client", []reconcile.Reconciler{e.gwClient, e.wgClient}, objs...)
}
