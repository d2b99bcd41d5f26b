package reconciler

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// waitWgClient waits until the WgGatewayClient ns/name reports, for its
// current generation, the Ready condition status and reason given, and check
// accepts its status.
func (e *gatewayEnv) waitWgClient(t *testing.T, ns, name string, ready metav1.ConditionStatus, reason string,
	check func(*netv1beta1.WgGatewayClientStatus) error) *netv1beta1.WgGatewayClient {
	t.Helper()
	var wg netv1beta1.WgGatewayClient
	eventually(t, fmt.Sprintf("WgGatewayClient %s/%s Ready=%s/%s", ns, name, ready, reason), func(ctx context.Context) error {
		if err := e.get(ctx, ns, name, &wg); err != nil {
			return err
		}
		if wg.Status.ObservedGeneration != wg.Generation {
			return fmt.Errorf("status describes generation %d, want %d", wg.Status.ObservedGeneration, wg.Generation)
		}
		if err := conditionIs(wg.Status.Conditions, wg.Generation, netv1beta1.ConditionReady, ready, reason); err != nil {
			return err
		}
		if check != nil {
			return check(&wg.Status)
		}
		return nil
	})
	return &wg
}

func testWgClient(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "wg-client")
	wg := &netv1beta1.WgGatewayClient{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "peer",
			Namespace: ns,
			Labels:    map[string]string{netv1beta1.RemoteClusterIDLabel: "remote-2"},
		},
		Spec: netv1beta1.WgGatewayClientSpec{Deployment: gatewayPodTemplate("peer", "gateway", "--mode=client")},
	}
	if err := e.c.Create(ctx, wg); err != nil {
		t.Fatal(err)
	}
	e.waitWgClient(t, ns, "peer", metav1.ConditionFalse, ReasonWaitingForGatewayPod, func(s *netv1beta1.WgGatewayClientStatus) error {
		if s.SecretRef == nil || s.SecretRef.Name != "gw-peer" {
			return fmt.Errorf("status.secretRef %+v, want gw-peer", s.SecretRef)
		}
		return nil
	})
	e.checkKeySecret(t, ns, "gw-peer", "remote-2")
	e.checkIdentity(t, ns, "peer", "gatewayclients", "gw-peer")
	var dep appsv1.Deployment
	if err := e.get(ctx, ns, "gw-peer", &dep); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&dep, wg) {
		t.Errorf("deployment is not controlled by the WgGatewayClient: %+v", dep.OwnerReferences)
	}

	e.createNode(t, "node-client")
	e.runGatewayPod(t, ns, "peer", "node-client", "10.244.0.9")
	e.waitWgClient(t, ns, "peer", metav1.ConditionTrue, ReasonReconciled, func(s *netv1beta1.WgGatewayClientStatus) error {
		ie := s.InternalEndpoint
		if ie == nil || ie.IP == nil || *ie.IP != "10.244.0.9" || ie.Node == nil || *ie.Node != "node-client" {
			return fmt.Errorf("internal endpoint %+v, want 10.244.0.9 on node-client", ie)
		}
		return nil
	})
	e.checkNoWrites(t, ns, "peer", []reconcile.Reconciler{e.wgClient},
		append(gatewayChildren(ns, "peer", false), &netv1beta1.WgGatewayClient{ObjectMeta: objectMeta(ns, "peer")})...)

	// The public key is published, the same as in the key Secret.
	secret := e.checkKeySecret(t, ns, "gw-peer", "remote-2")
	if err := e.get(ctx, ns, "peer", wg); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wg.Status.PublicKey, secret.Data[netv1beta1.PublicKeyField]) {
		t.Errorf("status.publicKey %x, want data.publicKey of the key Secret", wg.Status.PublicKey)
	}

	// A newer Ready pod with the same labels, not made by the gateway's
	// Deployment, does not become the active pod.
	e.runImpostorPod(t, ns, "peer", "node-client", "10.244.0.66")
	e.reconcileAgain(t, e.wgClient, ns, "peer")
	if err := e.get(ctx, ns, "peer", wg); err != nil {
		t.Fatal(err)
	}
	if ie := wg.Status.InternalEndpoint; ie == nil || ie.IP == nil || *ie.IP != "10.244.0.9" {
		t.Errorf("internal endpoint %+v after an impostor pod appeared, want the Deployment's pod 10.244.0.9", ie)
	}
}
