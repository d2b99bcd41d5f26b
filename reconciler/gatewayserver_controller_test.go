package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/templates"
)

// newGatewayServer builds a GatewayServer for remote cluster id, with the
// default template.
func newGatewayServer(ns, name, id string, typ corev1.ServiceType, nodePort *int32) *netv1beta1.GatewayServer {
	gw := &netv1beta1.GatewayServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: netv1beta1.GatewayServerSpec{
			Endpoint: netv1beta1.Endpoint{ServiceType: typ, NodePort: nodePort},
		},
	}
	if id != "" {
		gw.Labels = map[string]string{netv1beta1.RemoteClusterIDLabel: id}
	}
	return gw
}

// waitGatewayServer waits until the GatewayServer ns/name reports, for its
// current generation, the Ready condition status and reason given, and check
// accepts it.
func (e *gatewayEnv) waitGatewayServer(t *testing.T, ns, name string, ready metav1.ConditionStatus, reason string,
	check func(*netv1beta1.GatewayServer) error) *netv1beta1.GatewayServer {
	t.Helper()
	var gw netv1beta1.GatewayServer
	eventually(t, fmt.Sprintf("GatewayServer %s/%s Ready=%s/%s", ns, name, ready, reason), func(ctx context.Context) error {
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

// stalledWith checks that conds hold Stalled True with reason and message.
func stalledWith(conds []metav1.Condition, reason, message string) error {
	c := meta.FindStatusCondition(conds, netv1beta1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || c.Message != message {
		return fmt.Errorf("stalled condition %+v, want True/%s %q", c, reason, message)
	}
	return nil
}

// containerArgs returns the arguments of the gateway container of
// Deployment ns/gw-<name>.
func (e *gatewayEnv) containerArgs(ctx context.Context, ns, name string) ([]string, error) {
	var dep appsv1.Deployment
	if err := e.get(ctx, ns, "gw-"+name, &dep); err != nil {
		return nil, err
	}
	return dep.Spec.Template.Spec.Containers[0].Args, nil
}

func testGatewayServerNodePort(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gws-nodeport")
	gw := newGatewayServer(ns, "pinned", "remote-a", corev1.ServiceTypeNodePort, ptr.To[int32](30555))
	if err := e.c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	auto := newGatewayServer(ns, "auto", "remote-b", corev1.ServiceTypeNodePort, nil)
	if err := e.c.Create(ctx, auto); err != nil {
		t.Fatal(err)
	}

	// Keys and workload exist before any pod runs; the gateway waits for it.
	e.waitGatewayServer(t, ns, "pinned", metav1.ConditionFalse, ReasonWaitingForGatewayPod, func(g *netv1beta1.GatewayServer) error {
		want := &corev1.ObjectReference{APIVersion: "networking.liqo.io/v1beta1", Kind: "WgGatewayServer", Name: "pinned", Namespace: ns}
		if g.Status.ServerRef == nil || *g.Status.ServerRef != *want {
			return fmt.Errorf("status.serverRef %+v, want %+v", g.Status.ServerRef, want)
		}
		if g.Status.SecretRef == nil || g.Status.SecretRef.Name != "gw-pinned" {
			return fmt.Errorf("status.secretRef %+v, want gw-pinned", g.Status.SecretRef)
		}
		return conditionIs(g.Status.Conditions, g.Generation, netv1beta1.ConditionReconciling, metav1.ConditionTrue, ReasonWaitingForGatewayPod)
	})
	e.checkKeySecret(t, ns, "gw-pinned", "remote-a")
	args, err := e.containerArgs(ctx, ns, "pinned")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gateway", "--name=pinned", "--namespace=" + ns, "--remote-cluster-id=remote-a", "--mode=server",
		"--gateway-uid=" + string(gw.UID), "--mtu=1340", "--listen-port=51840", "--key-dir=/etc/peerlink/keys"}
	for _, a := range want {
		if !slices.Contains(args, a) {
			t.Errorf("gateway args %q lack %q", args, a)
		}
	}
	var wg netv1beta1.WgGatewayServer
	if err := e.get(ctx, ns, "pinned", &wg); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&wg, gw) || wg.Labels[netv1beta1.RemoteClusterIDLabel] != "remote-a" {
		t.Errorf("WgGatewayServer owners %+v labels %v: want controlled by the GatewayServer, labelled remote-a", wg.OwnerReferences, wg.Labels)
	}
	var svc corev1.Service
	if err := e.get(ctx, ns, "gw-pinned", &svc); err != nil {
		t.Fatal(err)
	}
	if p := svc.Spec.Ports[0]; svc.Spec.Type != corev1.ServiceTypeNodePort || p.NodePort != 30555 || p.Port != 51840 || p.Protocol != corev1.ProtocolUDP {
		t.Errorf("service %s %+v, want NodePort UDP 51840 on node port 30555", svc.Spec.Type, p)
	}
	var autoSvc corev1.Service
	eventually(t, "service of the gateway without a node port", func(ctx context.Context) error {
		return e.get(ctx, ns, "gw-auto", &autoSvc)
	})
	allocated := autoSvc.Spec.Ports[0].NodePort
	if allocated == 0 {
		t.Fatalf("no node port allocated: %+v", autoSvc.Spec.Ports)
	}

	// Pods run on a node known by its InternalIP only.
	e.createNode(t, "node-gws", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.30"})
	e.runGatewayPod(t, ns, "pinned", "node-gws", "10.244.0.30")
	e.runGatewayPod(t, ns, "auto", "node-gws", "10.244.0.31")
	for name, port := range map[string]int32{"pinned": 30555, "auto": allocated} {
		e.waitGatewayServer(t, ns, name, metav1.ConditionTrue, ReasonReconciled, func(g *netv1beta1.GatewayServer) error {
			if ie := g.Status.InternalEndpoint; ie == nil || ie.Node == nil || *ie.Node != "node-gws" || ie.IP == nil {
				return fmt.Errorf("internal endpoint %+v, want a pod on node-gws", ie)
			}
			return endpointIs(g.Status.Endpoint, port, "192.0.2.30")
		})
	}

	// The node gets an ExternalIP: it is preferred.
	e.setNodeAddresses(t, "node-gws",
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.30"},
		corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.30"})
	e.waitGatewayServer(t, ns, "pinned", metav1.ConditionTrue, ReasonReconciled, func(g *netv1beta1.GatewayServer) error {
		return endpointIs(g.Status.Endpoint, 30555, "198.51.100.30")
	})

	// Nothing changed: reconciling again writes nothing.
	objs := append(gatewayChildren(ns, "pinned", true),
		&netv1beta1.WgGatewayServer{ObjectMeta: objectMeta(ns, "pinned")},
		&netv1beta1.GatewayServer{ObjectMeta: objectMeta(ns, "pinned")})
	e.checkNoWrites(t, ns, "pinned", []reconcile.Reconciler{e.gwServer, e.wgServer}, objs...)
}

func testGatewayServerLoadBalancer(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gws-lb")
	gw := newGatewayServer(ns, "lb", "remote-lb", corev1.ServiceTypeLoadBalancer, nil)
	gw.Spec.ServiceAnnotations = map[string]string{"lb.example.org/pool": "edge"}
	gw.Spec.ServiceLabels = map[string]string{"app.kubernetes.io/part-of": "edge-gateways"}
	if err := e.c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	e.waitGatewayServer(t, ns, "lb", metav1.ConditionFalse, ReasonWaitingForLoadBalancer, nil)

	var svc corev1.Service
	if err := e.get(ctx, ns, "gw-lb", &svc); err != nil {
		t.Fatal(err)
	}
	// The gateway's service labels and annotations win over the template's.
	if got := svc.Annotations["lb.example.org/pool"]; got != "edge" {
		t.Errorf("service annotation = %q, want edge", got)
	}
	if got := svc.Labels["app.kubernetes.io/part-of"]; got != "edge-gateways" {
		t.Errorf("service label app.kubernetes.io/part-of = %q, want edge-gateways (the template says peerlink)", got)
	}
	if got := svc.Labels[GatewayNameLabel]; got != "lb" {
		t.Errorf("service label %s = %q, want lb (from the template)", GatewayNameLabel, got)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.org"}, {IP: "203.0.113.40"}}
	if err := e.c.Status().Update(ctx, &svc); err != nil {
		t.Fatal(err)
	}
	e.createNode(t, "node-lb")
	e.runGatewayPod(t, ns, "lb", "node-lb", "10.244.0.40")
	e.waitGatewayServer(t, ns, "lb", metav1.ConditionTrue, ReasonReconciled, func(g *netv1beta1.GatewayServer) error {
		return endpointIs(g.Status.Endpoint, netv1beta1.DefaultGatewayPort, "203.0.113.40", "lb.example.org")
	})
}

func testGatewayServerTemplateChange(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gws-template")
	defaults, err := templates.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := defaults[0]
	tmpl.SetNamespace(ns)
	tmpl.SetName("custom")
	setArg := func(arg string) {
		t.Helper()
		containers, _, err := unstructured.NestedSlice(tmpl.Object, "spec", "template", "spec", "deployment", "spec", "template", "spec", "containers")
		if err != nil || len(containers) == 0 {
			t.Fatalf("containers of the default template: %v", err)
		}
		c := containers[0].(map[string]any)
		args := c["args"].([]any)
		args = slices.DeleteFunc(args, func(a any) bool { return strings.HasPrefix(a.(string), "--keepalive=") })
		c["args"] = append(args, arg)
		if err := unstructured.SetNestedSlice(tmpl.Object, containers, "spec", "template", "spec", "deployment", "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
	}
	setArg("--keepalive=25s")
	if err := e.c.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	gw := newGatewayServer(ns, "custom", "remote-t", corev1.ServiceTypeClusterIP, nil)
	gw.Spec.ServerTemplateRef = corev1.ObjectReference{Name: "custom", Namespace: ns}
	if err := e.c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	hasArg := func(arg string) func(context.Context) error {
		return func(ctx context.Context) error {
			args, err := e.containerArgs(ctx, ns, "custom")
			if err != nil {
				return err
			}
			if !slices.Contains(args, arg) {
				return fmt.Errorf("args %q lack %s", args, arg)
			}
			return nil
		}
	}
	eventually(t, "deployment rendered from the custom template", hasArg("--keepalive=25s"))

	if err := e.get(ctx, ns, "custom", tmpl); err != nil {
		t.Fatal(err)
	}
	setArg("--keepalive=10s")
	if err := e.c.Update(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deployment follows the changed template", hasArg("--keepalive=10s"))

	// A template that does not render stalls the gateway with the engine's
	// message, which names the field.
	if err := e.get(ctx, ns, "custom", tmpl); err != nil {
		t.Fatal(err)
	}
	setArg("--keepalive={{ .Spec.Keepalive }}")
	if err := e.c.Update(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	e.waitGatewayServer(t, ns, "custom", metav1.ConditionFalse, ReasonInvalidTemplate, func(g *netv1beta1.GatewayServer) error {
		c := meta.FindStatusCondition(g.Status.Conditions, netv1beta1.ConditionStalled)
		if c == nil || !strings.Contains(c.Message, "spec.deployment.spec.template.spec.containers[0].args[") ||
			!strings.Contains(c.Message, "Keepalive") || !strings.HasPrefix(c.Message, "spec.serverTemplateRef: ") {
			return fmt.Errorf("stalled condition %+v does not name the template, the field and the error", c)
		}
		return nil
	})
	if _, err := e.containerArgs(ctx, ns, "custom"); err != nil {
		t.Errorf("the running gateway was touched by a failed render: %v", err)
	}
}

func testGatewayServerBadInput(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gws-bad")

	// No remote-cluster-id label: stalled, nothing created.
	unlabelled := newGatewayServer(ns, "unlabelled", "", corev1.ServiceTypeClusterIP, nil)
	if err := e.c.Create(ctx, unlabelled); err != nil {
		t.Fatal(err)
	}
	e.waitGatewayServer(t, ns, "unlabelled", metav1.ConditionFalse, ReasonMissingRemoteClusterID, func(g *netv1beta1.GatewayServer) error {
		return stalledWith(g.Status.Conditions, ReasonMissingRemoteClusterID,
			"metadata.labels[liqo.io/remote-cluster-id] is missing: set it to the ID of the peer cluster")
	})

	// A template that does not exist.
	missing := newGatewayServer(ns, "missing-template", "remote-m", corev1.ServiceTypeClusterIP, nil)
	missing.Spec.ServerTemplateRef = corev1.ObjectReference{Name: "nope"}
	if err := e.c.Create(ctx, missing); err != nil {
		t.Fatal(err)
	}
	e.waitGatewayServer(t, ns, "missing-template", metav1.ConditionFalse, ReasonTemplateNotFound, func(g *netv1beta1.GatewayServer) error {
		return stalledWith(g.Status.Conditions, ReasonTemplateNotFound,
			"spec.serverTemplateRef: WgGatewayServerTemplate peerlink/nope not found")
	})

	// A user Secret whose private key is one byte short.
	priv, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.PublicKey()
	short := &corev1.Secret{
		ObjectMeta: objectMeta(ns, "mykeys"),
		Data:       map[string][]byte{netv1beta1.PrivateKeyField: priv[:31], netv1beta1.PublicKeyField: pub[:]},
	}
	if err := e.c.Create(ctx, short); err != nil {
		t.Fatal(err)
	}
	userKeys := newGatewayServer(ns, "user-keys", "remote-k", corev1.ServiceTypeClusterIP, nil)
	userKeys.Spec.SecretRef.Name = "mykeys"
	if err := e.c.Create(ctx, userKeys); err != nil {
		t.Fatal(err)
	}
	e.waitGatewayServer(t, ns, "user-keys", metav1.ConditionFalse, ReasonInvalidKeys, func(g *netv1beta1.GatewayServer) error {
		return stalledWith(g.Status.Conditions, ReasonInvalidKeys,
			"WgGatewayServer "+ns+"/user-keys: secret "+ns+"/mykeys: data.privateKey must be 32 bytes, got 31")
	})

	// A second gateway for a peer that already has one.
	first := newGatewayServer(ns, "first", "remote-dup", corev1.ServiceTypeClusterIP, nil)
	if err := e.c.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	e.waitGatewayServer(t, ns, "first", metav1.ConditionFalse, ReasonWaitingForGatewayPod, nil)
	// Creation times have a resolution of one second: make the first one
	// older for sure.
	time.Sleep(1100 * time.Millisecond)
	second := &netv1beta1.GatewayClient{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: "second", Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: "remote-dup"},
	}}
	if err := e.c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	e.waitGatewayClient(t, ns, "second", metav1.ConditionFalse, ReasonDuplicateGateway, func(g *netv1beta1.GatewayClient) error {
		return stalledWith(g.Status.Conditions, ReasonDuplicateGateway,
			"GatewayServer "+ns+"/first already connects remote cluster remote-dup: delete one of the two")
	})

	for _, name := range []string{"unlabelled", "missing-template", "second"} {
		for _, obj := range append(gatewayChildren(ns, name, true),
			&netv1beta1.WgGatewayServer{}, &netv1beta1.WgGatewayClient{}) {
			key := obj.GetName()
			if key == "" {
				key = name
			}
			if err := e.isGone(ctx, ns, key, obj); err != nil {
				t.Errorf("stalled gateway %s made an object: %v", name, err)
			}
		}
	}
	if err := e.isGone(ctx, ns, "gw-user-keys", &appsv1.Deployment{}); err != nil {
		t.Errorf("gateway with invalid keys got a deployment: %v", err)
	}

	// The first one goes: the second takes the peer over.
	if err := e.c.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	e.waitGatewayClient(t, ns, "second", metav1.ConditionFalse, netv1beta1.ReasonWaitingForEndpoint, nil)
}

func testGatewayServerDeletion(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gws-delete")
	gw := newGatewayServer(ns, "doomed", "remote-d", corev1.ServiceTypeNodePort, nil)
	if err := e.c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	e.waitGatewayServer(t, ns, "doomed", metav1.ConditionFalse, ReasonWaitingForGatewayPod, nil)
	objs := append(gatewayChildren(ns, "doomed", true), &netv1beta1.WgGatewayServer{ObjectMeta: objectMeta(ns, "doomed")})
	for _, obj := range objs {
		if err := e.get(ctx, ns, obj.GetName(), obj); err != nil {
			t.Fatalf("before deletion: %v", err)
		}
	}
	if err := e.c.Delete(ctx, gw); err != nil {
		t.Fatal(err)
	}
	objs = append(objs, &netv1beta1.GatewayServer{ObjectMeta: objectMeta(ns, "doomed")})
	eventually(t, "everything the gateway made is gone", func(ctx context.Context) error {
		for _, obj := range objs {
			if err := e.isGone(ctx, ns, obj.GetName(), obj); err != nil {
				return err
			}
		}
		return nil
	})
}
