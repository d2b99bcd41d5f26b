package gateway

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/kube"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

// wgCase is WgGatewayServer or WgGatewayClient, for the tests both run.
type wgCase[T client.Object] struct {
	wgGatewayKind[T]
	r *wgGatewayReconciler[T]
	// new builds an object of the kind from the spec of a server, of which
	// a client takes what it has.
	new func(m metav1.ObjectMeta, spec netv1beta1.WgGatewayServerSpec) T
}

func wgServerCase(e *gatewayEnv) wgCase[*netv1beta1.WgGatewayServer] {
	return wgCase[*netv1beta1.WgGatewayServer]{wgGatewayKind: wgGatewayServerKind(), r: e.wgServer,
		new: func(m metav1.ObjectMeta, spec netv1beta1.WgGatewayServerSpec) *netv1beta1.WgGatewayServer {
			return &netv1beta1.WgGatewayServer{ObjectMeta: m, Spec: spec}
		}}
}

func wgClientCase(e *gatewayEnv) wgCase[*netv1beta1.WgGatewayClient] {
	return wgCase[*netv1beta1.WgGatewayClient]{wgGatewayKind: wgGatewayClientKind(), r: e.wgClient,
		new: func(m metav1.ObjectMeta, spec netv1beta1.WgGatewayServerSpec) *netv1beta1.WgGatewayClient {
			return &netv1beta1.WgGatewayClient{ObjectMeta: m, Spec: netv1beta1.WgGatewayClientSpec{Deployment: spec.Deployment, SecretRef: spec.SecretRef}}
		}}
}

// wgSpec is the spec of a gateway name exposed (when a server) by svc.
func wgSpec(name string, svc netv1beta1.ServiceTemplate) netv1beta1.WgGatewayServerSpec {
	return netv1beta1.WgGatewayServerSpec{Service: svc, Deployment: gatewayPodTemplate(name, "gateway", "--name="+name)}
}

// testWgGateway runs a gateway of the kind through its life: every child
// made before a pod runs, a pod that becomes active (for a server, reached
// through a NodePort Service at its node's address), a reconcile that has
// nothing to change, and a pod that copies the gateway's labels without
// being its Deployment's.
func testWgGateway[T client.Object](t *testing.T, e *gatewayEnv, c wgCase[T]) {
	ctx := t.Context()
	ns := e.namespace(t, strings.ToLower(c.name))
	id, node, server := "remote-"+ns, "node-"+ns, c.service != nil
	spec := wgSpec("peer", gatewayServiceTemplate("peer", corev1.ServiceTypeNodePort, 30444))
	// A template that asks for another account and says where the tunnel
	// may lead: neither is the template's to decide.
	tmpl := &spec.Deployment.Spec.Template.Spec
	tmpl.ServiceAccountName = "default"
	tmpl.Containers[0].Env = []corev1.EnvVar{{Name: netv1beta1.LocalCIDRsEnv, Value: "0.0.0.0/0"}, {Name: "KEEP", Value: "1"}}
	wg := c.new(peerMeta(ns, "peer", id), spec)
	e.create(t, wg)

	// Before any pod runs, every child exists and the gateway waits for it.
	c.waitReady(t, e, ns, "peer", metav1.ConditionFalse, ReasonWaitingForGatewayPod, func(wg T) error {
		s := c.status(wg)
		if ref := s.gateway.SecretRef; ref == nil || ref.Name != "gw-peer" || ref.Namespace != ns {
			return fmt.Errorf("status.secretRef %+v, want gw-peer in %s", ref, ns)
		}
		return conditionIs(s.common.Conditions, wg.GetGeneration(), netv1beta1.ConditionReconciling, metav1.ConditionTrue, ReasonWaitingForGatewayPod)
	})
	e.checkKeySecret(t, ns, "gw-peer", id)
	var dep appsv1.Deployment
	if err := e.get(ctx, ns, "gw-peer", &dep); err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Spec.ServiceAccountName; got != "gw-peer" {
		t.Errorf("pod service account %q, want gw-peer", got)
	}
	wantEnv := []corev1.EnvVar{{Name: "KEEP", Value: "1"}, {Name: netv1beta1.LocalCIDRsEnv, Value: "10.244.0.0/16,10.70.0.0/16"},
		{Name: netv1beta1.UnknownSourceEnv, Value: "10.70.0.0"}}
	if got := dep.Spec.Template.Spec.Containers[0].Env; !slices.Equal(got, wantEnv) {
		t.Errorf("container env %+v, want %+v", got, wantEnv)
	}
	if got := dep.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, []string{"gateway", "--name=peer"}) {
		t.Errorf("container args %q", got)
	}
	e.checkIdentity(t, ns, "peer", c.gatewayResource, "gw-peer")
	children := []metav1.Object{&dep}
	if server {
		var svc corev1.Service
		if err := e.get(ctx, ns, "gw-peer", &svc); err != nil {
			t.Fatal(err)
		}
		if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30444 {
			t.Errorf("service type %s node port %d, want NodePort 30444", svc.Spec.Type, svc.Spec.Ports[0].NodePort)
		}
		children = append(children, &svc)
	}
	for _, obj := range children {
		if !metav1.IsControlledBy(obj, wg) {
			t.Errorf("%s is not controlled by the %s: %+v", obj.GetName(), c.name, obj.GetOwnerReferences())
		}
		if obj.GetLabels()[netv1beta1.RemoteClusterIDLabel] != id {
			t.Errorf("%s lacks the remote cluster ID label: %v", obj.GetName(), obj.GetLabels())
		}
	}

	// A running pod on a node with only an InternalIP: a server is reached
	// at that address.
	e.createNode(t, node, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.10"})
	pod := e.runGatewayPod(t, ns, "peer", node, "10.244.0.7")
	c.waitReady(t, e, ns, "peer", metav1.ConditionTrue, outcome.ReasonReconciled, func(wg T) error {
		s := c.status(wg)
		if ie := s.gateway.InternalEndpoint; ie == nil || ie.IP == nil || *ie.IP != "10.244.0.7" || ie.Node == nil || *ie.Node != node {
			return fmt.Errorf("internal endpoint %+v, want 10.244.0.7 on %s", ie, node)
		}
		if server {
			return endpointIs(*s.endpoint, 30444, "192.0.2.10")
		}
		return nil
	})
	if server {
		// The node gets an ExternalIP: it wins.
		e.setNodeAddresses(t, node,
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.10"},
			corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.10"})
		c.waitReady(t, e, ns, "peer", metav1.ConditionTrue, outcome.ReasonReconciled, func(wg T) error {
			return endpointIs(*c.status(wg).endpoint, 30444, "198.51.100.10")
		})
	}
	t.Logf("gateway pod %s ready", pod)
	// The controller marks the active pod to go last in a rollout, as its
	// agent would (one of an earlier release does not).
	if err := podDeletionCost(ctx, e, ns, pod, kube.ActiveDeletionCost); err != nil {
		t.Error(err)
	}
	e.checkNoWrites(t, ns, "peer", []reconcile.Reconciler{c.r}, append(gatewayChildren(ns, "peer", server), c.named(ns, "peer"))...)

	// The public key is published, the same as in the key Secret.
	secret := e.checkKeySecret(t, ns, "gw-peer", id)
	if err := e.get(ctx, ns, "peer", wg); err != nil {
		t.Fatal(err)
	}
	if pub := c.status(wg).gateway.PublicKey; !bytes.Equal(pub, secret.Data[netv1beta1.PublicKeyField]) {
		t.Errorf("status.publicKey %x, want data.publicKey of the key Secret", pub)
	}

	// A newer Ready pod with the same labels, not made by the gateway's
	// Deployment, does not become the active pod.
	e.runImpostorPod(t, c.r.pods, ns, "peer", node, "10.244.0.66")
	e.reconcileAgain(t, c.r, ns, "peer")
	if err := e.get(ctx, ns, "peer", wg); err != nil {
		t.Fatal(err)
	}
	if ie := c.status(wg).gateway.InternalEndpoint; ie == nil || ie.IP == nil || *ie.IP != "10.244.0.7" {
		t.Errorf("internal endpoint %+v after an impostor pod appeared, want the Deployment's pod 10.244.0.7", ie)
	}
	if err := podDeletionCost(ctx, e, ns, "impostor", ""); err != nil {
		t.Error(err)
	}
}

// podDeletionCost checks the deletion cost of pod ns/name ("" for none).
func podDeletionCost(ctx context.Context, e *gatewayEnv, ns, name, want string) error {
	var p corev1.Pod
	if err := e.get(ctx, ns, name, &p); err != nil {
		return err
	}
	if got := p.Annotations[corev1.PodDeletionCost]; got != want {
		return fmt.Errorf("pod %s/%s: deletion cost %q, want %q", ns, name, got, want)
	}
	return nil
}

func testWgServerClusterIP(t *testing.T, e *gatewayEnv) {
	c := wgServerCase(e)
	ns := e.namespace(t, "wg-server-clusterip")
	e.create(t, c.new(peerMeta(ns, "peer", "remote-1"), wgSpec("peer", gatewayServiceTemplate("peer", corev1.ServiceTypeClusterIP, 0))))
	c.waitReady(t, e, ns, "peer", metav1.ConditionFalse, ReasonWaitingForGatewayPod, nil)
	var svc corev1.Service
	if err := e.get(t.Context(), ns, "gw-peer", &svc); err != nil {
		t.Fatal(err)
	}
	c.waitReady(t, e, ns, "peer", metav1.ConditionFalse, ReasonWaitingForGatewayPod, func(wg *netv1beta1.WgGatewayServer) error {
		return endpointIs(wg.Status.Endpoint, netv1beta1.DefaultGatewayPort, svc.Spec.ClusterIP)
	})
}

// testWgUserSecret gives a gateway of the kind a key Secret of the user's
// that does not hold a key pair: the gateway stalls, naming the Secret and
// the field, runs nothing and generates no pair; fixed, it goes on with the
// user's Secret.
func testWgUserSecret[T client.Object](t *testing.T, e *gatewayEnv, c wgCase[T]) {
	ctx := t.Context()
	ns := e.namespace(t, strings.ToLower(c.name)+"-user-secret")
	priv, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.PublicKey()
	secret := &corev1.Secret{
		ObjectMeta: objectMeta(ns, "mykeys"),
		Data: map[string][]byte{
			netv1beta1.PrivateKeyField: priv[:31],
			netv1beta1.PublicKeyField:  pub[:],
		},
	}
	e.create(t, secret)
	spec := wgSpec("peer", gatewayServiceTemplate("peer", corev1.ServiceTypeClusterIP, 0))
	spec.SecretRef.Name = "mykeys"
	e.create(t, c.new(peerMeta(ns, "peer", "remote-"+ns), spec))
	stalled := func(msg string) func(T) error {
		return func(wg T) error { return stalledWith(c.status(wg).common.Conditions, ReasonInvalidKeys, msg) }
	}
	c.waitReady(t, e, ns, "peer", metav1.ConditionFalse, ReasonInvalidKeys,
		stalled("secret "+ns+"/mykeys: data.privateKey must be 32 bytes, got 31"))
	var dep appsv1.Deployment
	if err := e.isGone(ctx, ns, "gw-peer", &dep); err != nil {
		t.Errorf("deployment made with invalid keys: %v", err)
	}
	if err := e.isGone(ctx, ns, "gw-peer", &corev1.Secret{}); err != nil {
		t.Errorf("a key pair was generated although spec.secretRef names one: %v", err)
	}

	// A full-length private key that does not match the public key.
	other, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	secret.Data[netv1beta1.PrivateKeyField] = other[:]
	if err := e.c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	c.waitReady(t, e, ns, "peer", metav1.ConditionFalse, ReasonInvalidKeys,
		stalled("secret "+ns+"/mykeys: data.publicKey is not the public key of data.privateKey"))

	// Fixed: the gateway goes on and uses the user's Secret.
	secret.Data[netv1beta1.PrivateKeyField] = priv[:]
	if err := e.c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	c.waitReady(t, e, ns, "peer", metav1.ConditionFalse, ReasonWaitingForGatewayPod, func(wg T) error {
		s := c.status(wg)
		if meta.FindStatusCondition(s.common.Conditions, netv1beta1.ConditionStalled) != nil {
			return fmt.Errorf("still stalled")
		}
		if ref := s.gateway.SecretRef; ref == nil || ref.Name != "mykeys" {
			return fmt.Errorf("status.secretRef %+v, want mykeys", ref)
		}
		return nil
	})
	if err := e.get(ctx, ns, "gw-peer", &dep); err != nil {
		t.Fatal(err)
	}
	if err := e.isGone(ctx, ns, "gw-peer", &corev1.Secret{}); err != nil {
		t.Errorf("a key pair was generated although spec.secretRef names one: %v", err)
	}
	e.checkIdentity(t, ns, "peer", c.gatewayResource, "mykeys")
}
