package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/outcome"
	"github.com/peerlink/peerlink/templates"
)

// gatewayCase is GatewayServer or GatewayClient, for the tests both run.
type gatewayCase[T client.Object] struct {
	gatewayKind[T]
	r reconcile.Reconciler
	// wg reconciles what the kind renders by default, whose agent reads
	// gatewayResource.
	wg              reconcile.Reconciler
	gatewayResource string
	// new builds an object of the kind from the spec of a server, of which
	// a client takes what it has.
	new func(m metav1.ObjectMeta, spec netv1beta1.GatewayServerSpec) T
}

func gatewayServerCase(e *gatewayEnv) gatewayCase[*netv1beta1.GatewayServer] {
	return gatewayCase[*netv1beta1.GatewayServer]{gatewayKind: gatewayServerKind(), r: e.gwServer,
		wg: e.wgServer, gatewayResource: e.wgServer.kind.gatewayResource,
		new: func(m metav1.ObjectMeta, spec netv1beta1.GatewayServerSpec) *netv1beta1.GatewayServer {
			return &netv1beta1.GatewayServer{ObjectMeta: m, Spec: spec}
		}}
}

func gatewayClientCase(e *gatewayEnv) gatewayCase[*netv1beta1.GatewayClient] {
	return gatewayCase[*netv1beta1.GatewayClient]{gatewayKind: gatewayClientKind(), r: e.gwClient,
		wg: e.wgClient, gatewayResource: e.wgClient.kind.gatewayResource,
		new: func(m metav1.ObjectMeta, spec netv1beta1.GatewayServerSpec) *netv1beta1.GatewayClient {
			return &netv1beta1.GatewayClient{ObjectMeta: m, Spec: netv1beta1.GatewayClientSpec{
				ClientTemplateRef: spec.ServerTemplateRef, MTU: spec.MTU, SecretRef: spec.SecretRef}}
		}}
}

// renderedObject is an empty object of the kind the default template
// renders for a gateway of the case's kind, named ns/name.
func (c gatewayCase[T]) renderedObject(ns, name string) client.Object {
	obj := c.owned.DeepCopyObject().(client.Object)
	obj.SetNamespace(ns)
	obj.SetName(name)
	return obj
}

// newGatewayServer builds a GatewayServer for remote cluster id (none when
// empty), with the default template.
func newGatewayServer(ns, name, id string, typ corev1.ServiceType, nodePort *int32) *netv1beta1.GatewayServer {
	return &netv1beta1.GatewayServer{
		ObjectMeta: peerMeta(ns, name, id),
		Spec:       netv1beta1.GatewayServerSpec{Endpoint: netv1beta1.Endpoint{ServiceType: typ, NodePort: nodePort}},
	}
}

// testGateway runs a gateway of the kind through its life: keys and
// workload made before anything runs (for a client, before the server's
// endpoint is known, so that the public key can go to the peer in the first
// message), a pod that becomes active (for a server, reached through a
// NodePort Service on a pinned port at its node's address), and a
// reconcile that has nothing to change.
func testGateway[T client.Object](t *testing.T, e *gatewayEnv, c gatewayCase[T]) {
	ctx := t.Context()
	ns := e.namespace(t, strings.ToLower(c.name))
	id, node := "remote-"+ns, "node-"+ns
	gw := c.new(peerMeta(ns, "peer", id), netv1beta1.GatewayServerSpec{
		Endpoint: netv1beta1.Endpoint{ServiceType: corev1.ServiceTypeNodePort, NodePort: ptr.To[int32](30555)}})
	e.create(t, gw)

	// Keys and workload exist before any pod runs: a server waits for its
	// pod, a client first for the server's endpoint.
	waiting, mode, kindArg := ReasonWaitingForGatewayPod, "server", "--listen-port=51840"
	if !c.server {
		waiting, mode, kindArg = netv1beta1.ReasonWaitingForEndpoint, "client", "--endpoint-address="
	}
	c.waitReady(t, e, ns, "peer", metav1.ConditionFalse, waiting, func(g T) error {
		s := c.status(g)
		want := &corev1.ObjectReference{APIVersion: "networking.liqo.io/v1beta1", Kind: templates.RenderedKind(c.server).Kind, Name: "peer", Namespace: ns}
		if ref := *s.rendered; ref == nil || *ref != *want {
			return fmt.Errorf("status reference to the rendered object %+v, want %+v", ref, want)
		}
		if ref := s.gateway.SecretRef; ref == nil || ref.Name != "gw-peer" || ref.Namespace != ns {
			return fmt.Errorf("status.secretRef %+v, want gw-peer in %s", ref, ns)
		}
		return conditionIs(s.common.Conditions, g.GetGeneration(), netv1beta1.ConditionReconciling, metav1.ConditionTrue, waiting)
	})
	e.checkKeySecret(t, ns, "gw-peer", id)
	args, err := e.containerArgs(ctx, ns, "peer")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"gateway", "--name=peer", "--namespace=" + ns, "--remote-cluster-id=" + id, "--mode=" + mode,
		"--gateway-uid=" + string(gw.GetUID()), "--mtu=1340", "--key-dir=/etc/peerlink/keys", kindArg} {
		if !slices.Contains(args, a) {
			t.Errorf("gateway args %q lack %q", args, a)
		}
	}
	wg := c.renderedObject(ns, "peer")
	if err := e.get(ctx, ns, "peer", wg); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(wg, gw) || wg.GetLabels()[netv1beta1.RemoteClusterIDLabel] != id {
		t.Errorf("%T owners %+v labels %v: want controlled by the %s, labelled %s", wg, wg.GetOwnerReferences(), wg.GetLabels(), c.name, id)
	}
	e.checkIdentity(t, ns, "peer", c.gatewayResource, "gw-peer")
	if c.server {
		var svc corev1.Service
		if err := e.get(ctx, ns, "gw-peer", &svc); err != nil {
			t.Fatal(err)
		}
		if p := svc.Spec.Ports[0]; svc.Spec.Type != corev1.ServiceTypeNodePort || p.NodePort != 30555 || p.Port != 51840 || p.Protocol != corev1.ProtocolUDP {
			t.Errorf("service %s %+v, want NodePort UDP 51840 on node port 30555", svc.Spec.Type, p)
		}
	} else {
		e.answerWithEndpoint(t, ns, "peer")
	}

	// A pod runs on a node known by its InternalIP only.
	e.createNode(t, node, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.30"})
	e.runGatewayPod(t, ns, "peer", node, "10.244.0.30")
	c.waitReady(t, e, ns, "peer", metav1.ConditionTrue, outcome.ReasonReconciled, func(g T) error {
		s := c.status(g)
		if ie := s.gateway.InternalEndpoint; ie == nil || ie.IP == nil || *ie.IP != "10.244.0.30" || ie.Node == nil || *ie.Node != node {
			return fmt.Errorf("internal endpoint %+v, want 10.244.0.30 on %s", ie, node)
		}
		if c.server {
			return endpointIs(*s.endpoint, 30555, "192.0.2.30")
		}
		return nil
	})
	if c.server {
		// The node gets an ExternalIP: it is preferred.
		e.setNodeAddresses(t, node,
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.30"},
			corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.30"})
		c.waitReady(t, e, ns, "peer", metav1.ConditionTrue, outcome.ReasonReconciled, func(g T) error {
			return endpointIs(*c.status(g).endpoint, 30555, "198.51.100.30")
		})
	}

	// Nothing changed: reconciling again writes nothing.
	objs := append(gatewayChildren(ns, "peer", c.server), c.renderedObject(ns, "peer"), c.named(ns, "peer"))
	e.checkNoWrites(t, ns, "peer", []reconcile.Reconciler{c.r, c.wg}, objs...)
}

// answerWithEndpoint does what the peer does once it knows its server's
// endpoint: sets it in GatewayClient ns/name, and waits until the gateway's
// Deployment has it and the client waits for its pod.
func (e *gatewayEnv) answerWithEndpoint(t *testing.T, ns, name string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var gw netv1beta1.GatewayClient
		if err := e.get(t.Context(), ns, name, &gw); err != nil {
			return err
		}
		gw.Spec.Endpoint.Addresses = []string{"198.51.100.50", "server.example.org"}
		gw.Spec.Endpoint.Port = 30555
		return e.c.Update(t.Context(), &gw)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "deployment with the server's endpoint", func(ctx context.Context) error {
		args, err := e.containerArgs(ctx, ns, name)
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
	gatewayClientKind().waitReady(t, e, ns, name, metav1.ConditionFalse, ReasonWaitingForGatewayPod, nil)
}

// testGatewayServerAllocatedNodePort: a NodePort server that pins no node
// port publishes the one the API server allocated.
func testGatewayServerAllocatedNodePort(t *testing.T, e *gatewayEnv) {
	ns := e.namespace(t, "gws-nodeport")
	e.create(t, newGatewayServer(ns, "auto", "remote-b", corev1.ServiceTypeNodePort, nil))
	var svc corev1.Service
	eventually(t, "service of the gateway without a node port", func(ctx context.Context) error {
		return e.get(ctx, ns, "gw-auto", &svc)
	})
	allocated := svc.Spec.Ports[0].NodePort
	if allocated == 0 {
		t.Fatalf("no node port allocated: %+v", svc.Spec.Ports)
	}
	e.createNode(t, "node-gws", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.31"})
	e.runGatewayPod(t, ns, "auto", "node-gws", "10.244.0.31")
	gatewayServerKind().waitReady(t, e, ns, "auto", metav1.ConditionTrue, outcome.ReasonReconciled, func(g *netv1beta1.GatewayServer) error {
		if ie := g.Status.InternalEndpoint; ie == nil || ie.Node == nil || *ie.Node != "node-gws" || ie.IP == nil {
			return fmt.Errorf("internal endpoint %+v, want a pod on node-gws", ie)
		}
		return endpointIs(g.Status.Endpoint, allocated, "192.0.2.31")
	})
}

func testGatewayServerLoadBalancer(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gws-lb")
	gw := newGatewayServer(ns, "lb", "remote-lb", corev1.ServiceTypeLoadBalancer, nil)
	gw.Spec.ServiceAnnotations = map[string]string{"lb.example.org/pool": "edge"}
	gw.Spec.ServiceLabels = map[string]string{"app.kubernetes.io/part-of": "edge-gateways"}
	e.create(t, gw)
	gatewayServerKind().waitReady(t, e, ns, "lb", metav1.ConditionFalse, ReasonWaitingForLoadBalancer, nil)

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
	if got := svc.Labels[netv1beta1.GatewayNameLabel]; got != "lb" {
		t.Errorf("service label %s = %q, want lb (from the template)", netv1beta1.GatewayNameLabel, got)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.org"}, {IP: "203.0.113.40"}}
	if err := e.c.Status().Update(ctx, &svc); err != nil {
		t.Fatal(err)
	}
	e.createNode(t, "node-lb")
	e.runGatewayPod(t, ns, "lb", "node-lb", "10.244.0.40")
	gatewayServerKind().waitReady(t, e, ns, "lb", metav1.ConditionTrue, outcome.ReasonReconciled, func(g *netv1beta1.GatewayServer) error {
		return endpointIs(g.Status.Endpoint, netv1beta1.DefaultGatewayPort, "203.0.113.40", "lb.example.org")
	})
}

// testGatewayReplicasStrategy checks how a gateway's pods roll out: one
// pod is replaced (Recreate), since it carries the tunnel from its start;
// of several, which stand by for the Lease, one at a time with a new pod up
// before an old one goes (RollingUpdate, surge 1, none unavailable). Going
// from one replica to several replaces the single pod too, which takes no
// part in the election, and the replicas roll once that rollout has ended.
// The strategy changes each way through the controller's apply, which the
// API server refuses when a rollingUpdate is left behind a Recreate.
func testGatewayReplicasStrategy(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gws-replicas")
	gw := newGatewayServer(ns, "rolled", "remote-replicas", corev1.ServiceTypeClusterIP, nil)
	gw.Spec.Replicas = 2
	e.create(t, gw)
	strategyIs := func(replicas int32, want appsv1.DeploymentStrategy) func(context.Context) error {
		return func(ctx context.Context) error {
			var dep appsv1.Deployment
			if err := e.get(ctx, ns, "gw-rolled", &dep); err != nil {
				return err
			}
			if got := ptr.Deref(dep.Spec.Replicas, 0); got != replicas {
				return fmt.Errorf("%d replicas, want %d", got, replicas)
			}
			if diff := cmp.Diff(want, dep.Spec.Strategy); diff != "" {
				return fmt.Errorf("strategy (-want +got):\n%s", diff)
			}
			return nil
		}
	}
	rolling := appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromString("0%"))}}
	recreate := appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	setReplicas := func(n int32) {
		t.Helper()
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)))
		if err := e.c.Patch(ctx, gatewayServerKind().named(ns, "rolled"), patch); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "two replicas roll one at a time", strategyIs(2, rolling))
	setReplicas(1)
	eventually(t, "one replica is recreated", strategyIs(1, recreate))
	setReplicas(2)
	eventually(t, "going from one replica to two recreates", strategyIs(2, recreate))
	// No Deployment controller runs here: the rollout's end is written as
	// that controller would.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var dep appsv1.Deployment
		if err := e.get(ctx, ns, "gw-rolled", &dep); err != nil {
			return err
		}
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 2, UpdatedReplicas: 2}
		return e.c.Status().Update(ctx, &dep)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "two replicas roll again once they run", strategyIs(2, rolling))
}

func testGatewayServerTemplateChange(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gws-template")
	tmpl := defaultTemplate(t, 0, ns, "custom")
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
	changeArg := func(arg string) {
		t.Helper()
		if err := e.get(ctx, ns, "custom", tmpl); err != nil {
			t.Fatal(err)
		}
		setArg(arg)
		if err := e.c.Update(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
	}
	setArg("--keepalive=25s")
	e.create(t, tmpl)
	gw := newGatewayServer(ns, "custom", "remote-t", corev1.ServiceTypeClusterIP, nil)
	gw.Spec.ServerTemplateRef = corev1.ObjectReference{Name: "custom", Namespace: ns}
	e.create(t, gw)
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
	changeArg("--keepalive=10s")
	eventually(t, "deployment follows the changed template", hasArg("--keepalive=10s"))

	// A template that does not render stalls the gateway with the engine's
	// message, which names the field.
	changeArg("--keepalive={{ .Spec.Keepalive }}")
	gatewayServerKind().waitReady(t, e, ns, "custom", metav1.ConditionFalse, ReasonInvalidTemplate, func(g *netv1beta1.GatewayServer) error {
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

// testGatewayBadInput gives gateways of the kind what they cannot run
// with: no peer, a template that does not exist, a key Secret without a key
// pair. Each stalls naming what is wrong, and runs nothing.
func testGatewayBadInput[T client.Object](t *testing.T, e *gatewayEnv, c gatewayCase[T]) {
	ns := e.namespace(t, strings.ToLower(c.name)+"-bad")
	clusterIP := netv1beta1.Endpoint{ServiceType: corev1.ServiceTypeClusterIP}
	stalled := func(reason, message string) func(T) error {
		return func(g T) error { return stalledWith(c.status(g).common.Conditions, reason, message) }
	}

	// No remote-cluster-id label: stalled, nothing created.
	e.create(t, c.new(peerMeta(ns, "unlabelled", ""), netv1beta1.GatewayServerSpec{Endpoint: clusterIP}))
	c.waitReady(t, e, ns, "unlabelled", metav1.ConditionFalse, outcome.ReasonMissingRemoteClusterID, stalled(outcome.ReasonMissingRemoteClusterID,
		"metadata.labels[liqo.io/remote-cluster-id] is missing: set it to the ID of the peer cluster"))

	// A template that does not exist.
	templateKind := templates.ClientTemplateKind
	if c.server {
		templateKind = templates.ServerTemplateKind
	}
	e.create(t, c.new(peerMeta(ns, "missing-template", "remote-"+ns+"-m"),
		netv1beta1.GatewayServerSpec{ServerTemplateRef: corev1.ObjectReference{Name: "nope"}, Endpoint: clusterIP}))
	c.waitReady(t, e, ns, "missing-template", metav1.ConditionFalse, ReasonTemplateNotFound, stalled(ReasonTemplateNotFound,
		c.templateField+": "+templateKind+" peerlink/nope not found"))

	// A user Secret whose private key is one byte short.
	priv, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.PublicKey()
	e.create(t, &corev1.Secret{
		ObjectMeta: objectMeta(ns, "mykeys"),
		Data:       map[string][]byte{netv1beta1.PrivateKeyField: priv[:31], netv1beta1.PublicKeyField: pub[:]},
	})
	e.create(t, c.new(peerMeta(ns, "user-keys", "remote-"+ns+"-k"),
		netv1beta1.GatewayServerSpec{SecretRef: corev1.LocalObjectReference{Name: "mykeys"}, Endpoint: clusterIP}))
	c.waitReady(t, e, ns, "user-keys", metav1.ConditionFalse, ReasonInvalidKeys, stalled(ReasonInvalidKeys,
		templates.RenderedKind(c.server).Kind+" "+ns+"/user-keys: secret "+ns+"/mykeys: data.privateKey must be 32 bytes, got 31"))

	for _, name := range []string{"unlabelled", "missing-template"} {
		e.checkNothingRendered(t, ns, name)
	}
	if err := e.isGone(t.Context(), ns, "gw-user-keys", &appsv1.Deployment{}); err != nil {
		t.Errorf("gateway with invalid keys got a deployment: %v", err)
	}
}

// testGatewayClientPorts: a client whose server port is written in list
// form only, as a newer server hands it over, is not waiting for its
// endpoint, and its template reads the port in either form.
func testGatewayClientPorts(t *testing.T, e *gatewayEnv) {
	ns := e.namespace(t, "gwc-ports")
	tmpl := defaultTemplate(t, 1, ns, "ports")
	containersPath := []string{"spec", "template", "spec", "deployment", "spec", "template", "spec", "containers"}
	containers, _, err := unstructured.NestedSlice(tmpl.Object, containersPath...)
	if err != nil || len(containers) == 0 {
		t.Fatalf("containers of the default client template: %v", err)
	}
	c := containers[0].(map[string]any)
	c["args"] = append(c["args"].([]any), "--endpoint-ports={{ range $i, $p := .Spec.Endpoint.Ports }}{{ if $i }},{{ end }}{{ $p }}{{ end }}")
	if err := unstructured.SetNestedSlice(tmpl.Object, containers, containersPath...); err != nil {
		t.Fatal(err)
	}
	e.create(t, tmpl)
	gw := &netv1beta1.GatewayClient{ObjectMeta: peerMeta(ns, "ports", "remote-p"), Spec: netv1beta1.GatewayClientSpec{
		ClientTemplateRef: corev1.ObjectReference{Name: "ports", Namespace: ns},
		Endpoint:          netv1beta1.GatewayClientEndpoint{Addresses: []string{"198.51.100.60"}, Ports: []int32{30557}},
	}}
	e.create(t, gw)
	eventually(t, "deployment with the port in both forms", func(ctx context.Context) error {
		args, err := e.containerArgs(ctx, ns, "ports")
		if err != nil {
			return err
		}
		for _, a := range []string{"--endpoint-address=198.51.100.60", "--endpoint-port=30557", "--endpoint-ports=30557"} {
			if !slices.Contains(args, a) {
				return fmt.Errorf("args %q lack %s", args, a)
			}
		}
		return nil
	})
	gatewayClientKind().waitReady(t, e, ns, "ports", metav1.ConditionFalse, ReasonWaitingForGatewayPod, nil)
	// The spec is the user's: the list is kept as written, port not filled in.
	var got netv1beta1.GatewayClient
	if err := e.get(t.Context(), ns, "ports", &got); err != nil {
		t.Fatal(err)
	}
	if ep := got.Spec.Endpoint; ep.Port != 0 || !slices.Equal(ep.Ports, []int32{30557}) {
		t.Fatalf("spec.endpoint port %d ports %v, want ports [30557] alone", ep.Port, ep.Ports)
	}
}

// testDuplicateGateway gives a peer a second gateway, of the other kind:
// it stalls and runs nothing until the first one goes, then takes the peer
// over.
func testDuplicateGateway(t *testing.T, e *gatewayEnv) {
	ns := e.namespace(t, "gws-duplicate")
	first := newGatewayServer(ns, "first", "remote-dup", corev1.ServiceTypeClusterIP, nil)
	e.create(t, first)
	gatewayServerKind().waitReady(t, e, ns, "first", metav1.ConditionFalse, ReasonWaitingForGatewayPod, nil)
	// Creation times have a resolution of one second: make the first one
	// older for sure.
	time.Sleep(1100 * time.Millisecond)
	e.create(t, &netv1beta1.GatewayClient{ObjectMeta: peerMeta(ns, "second", "remote-dup")})
	gatewayClientKind().waitReady(t, e, ns, "second", metav1.ConditionFalse, ReasonDuplicateGateway, func(g *netv1beta1.GatewayClient) error {
		return stalledWith(g.Status.Conditions, ReasonDuplicateGateway,
			"GatewayServer "+ns+"/first already connects remote cluster remote-dup: delete one of the two")
	})
	e.checkNothingRendered(t, ns, "second")

	// The first one goes: the second takes the peer over.
	if err := e.c.Delete(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	gatewayClientKind().waitReady(t, e, ns, "second", metav1.ConditionFalse, netv1beta1.ReasonWaitingForEndpoint, nil)
}

// checkNothingRendered checks that nothing was made for gateway ns/name:
// neither object a template renders, nor what runs a gateway.
func (e *gatewayEnv) checkNothingRendered(t *testing.T, ns, name string) {
	t.Helper()
	for _, obj := range append(gatewayChildren(ns, name, true),
		&netv1beta1.WgGatewayServer{ObjectMeta: objectMeta(ns, name)}, &netv1beta1.WgGatewayClient{ObjectMeta: objectMeta(ns, name)}) {
		if err := e.isGone(t.Context(), ns, obj.GetName(), obj); err != nil {
			t.Errorf("stalled gateway %s made an object: %v", name, err)
		}
	}
}

func testGatewayServerDeletion(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gws-delete")
	gw := newGatewayServer(ns, "doomed", "remote-d", corev1.ServiceTypeNodePort, nil)
	e.create(t, gw)
	gatewayServerKind().waitReady(t, e, ns, "doomed", metav1.ConditionFalse, ReasonWaitingForGatewayPod, nil)
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
