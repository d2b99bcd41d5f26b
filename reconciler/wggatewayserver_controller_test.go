package reconciler

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// newWgServer builds a WgGatewayServer for remote cluster "remote-1".
func newWgServer(ns, name string, svc netv1beta1.ServiceTemplate) *netv1beta1.WgGatewayServer {
	return &netv1beta1.WgGatewayServer{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: ns,
			Labels:    map[string]string{netv1beta1.RemoteClusterIDLabel: "remote-1"},
		},
		Spec: netv1beta1.WgGatewayServerSpec{
			Service:    svc,
			Deployment: gatewayPodTemplate(name, "gateway", "--name="+name),
		},
	}
}

// waitWgServer waits until the WgGatewayServer ns/name reports, for its
// current generation, the Ready condition status and reason given, and check
// accepts its status.
func (e *gatewayEnv) waitWgServer(t *testing.T, ns, name string, ready metav1.ConditionStatus, reason string,
	check func(*netv1beta1.WgGatewayServerStatus) error) *netv1beta1.WgGatewayServer {
	t.Helper()
	var wg netv1beta1.WgGatewayServer
	eventually(t, fmt.Sprintf("WgGatewayServer %s/%s Ready=%s/%s", ns, name, ready, reason), func(ctx context.Context) error {
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

// endpointIs checks an endpoint status.
func endpointIs(ep *netv1beta1.EndpointStatus, port int32, addrs ...string) error {
	if ep == nil {
		return fmt.Errorf("no endpoint")
	}
	if !slices.Equal(ep.Addresses, addrs) || ep.Port != port || ep.Protocol == nil || *ep.Protocol != corev1.ProtocolUDP {
		return fmt.Errorf("endpoint %v port %d protocol %v, want %v port %d UDP", ep.Addresses, ep.Port, ep.Protocol, addrs, port)
	}
	return nil
}

func testWgServerNodePort(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "wg-server-nodeport")
	wg := newWgServer(ns, "peer", gatewayServiceTemplate("peer", corev1.ServiceTypeNodePort, 30444))
	// A template that asks for another account and says where the tunnel
	// may lead: neither is the template's to decide.
	tmpl := &wg.Spec.Deployment.Spec.Template.Spec
	tmpl.ServiceAccountName = "default"
	tmpl.Containers[0].Env = []corev1.EnvVar{{Name: netv1beta1.LocalCIDRsEnv, Value: "0.0.0.0/0"}, {Name: "KEEP", Value: "1"}}
	if err := e.c.Create(ctx, wg); err != nil {
		t.Fatal(err)
	}

	// Before any pod runs, every child exists and the server waits for it.
	e.waitWgServer(t, ns, "peer", metav1.ConditionFalse, ReasonWaitingForGatewayPod, func(s *netv1beta1.WgGatewayServerStatus) error {
		if s.SecretRef == nil || s.SecretRef.Name != "gw-peer" || s.SecretRef.Namespace != ns {
			return fmt.Errorf("status.secretRef %+v, want gw-peer in %s", s.SecretRef, ns)
		}
		return conditionIs(s.Conditions, wg.Generation, netv1beta1.ConditionReconciling, metav1.ConditionTrue, ReasonWaitingForGatewayPod)
	})
	e.checkKeySecret(t, ns, "gw-peer", "remote-1")
	var svc corev1.Service
	if err := e.get(ctx, ns, "gw-peer", &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30444 {
		t.Errorf("service type %s node port %d, want NodePort 30444", svc.Spec.Type, svc.Spec.Ports[0].NodePort)
	}
	var dep appsv1.Deployment
	if err := e.get(ctx, ns, "gw-peer", &dep); err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Spec.ServiceAccountName; got != "gw-peer" {
		t.Errorf("pod service account %q, want gw-peer", got)
	}
	wantEnv := []corev1.EnvVar{{Name: "KEEP", Value: "1"}, {Name: netv1beta1.LocalCIDRsEnv, Value: "10.244.0.0/16,10.70.0.0/16"}}
	if got := dep.Spec.Template.Spec.Containers[0].Env; !slices.Equal(got, wantEnv) {
		t.Errorf("container env %+v, want %+v", got, wantEnv)
	}
	if got := dep.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, []string{"gateway", "--name=peer"}) {
		t.Errorf("container args %q", got)
	}
	e.checkIdentity(t, ns, "peer", "gatewayservers", "gw-peer")
	for _, obj := range []metav1.Object{&svc, &dep} {
		if !metav1.IsControlledBy(obj, wg) {
			t.Errorf("%s is not controlled by the WgGatewayServer: %+v", obj.GetName(), obj.GetOwnerReferences())
		}
		if obj.GetLabels()[netv1beta1.RemoteClusterIDLabel] != "remote-1" {
			t.Errorf("%s lacks the remote cluster ID label: %v", obj.GetName(), obj.GetLabels())
		}
	}

	// A running pod on a node with only an InternalIP: that address.
	e.createNode(t, "node-np", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.10"})
	pod := e.runGatewayPod(t, ns, "peer", "node-np", "10.244.0.7")
	e.waitWgServer(t, ns, "peer", metav1.ConditionTrue, ReasonReconciled, func(s *netv1beta1.WgGatewayServerStatus) error {
		ie := s.InternalEndpoint
		if ie == nil || ie.IP == nil || *ie.IP != "10.244.0.7" || ie.Node == nil || *ie.Node != "node-np" {
			return fmt.Errorf("internal endpoint %+v, want 10.244.0.7 on node-np", ie)
		}
		return endpointIs(s.Endpoint, 30444, "192.0.2.10")
	})

	// The node gets an ExternalIP: it wins.
	e.setNodeAddresses(t, "node-np",
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.10"},
		corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.10"})
	e.waitWgServer(t, ns, "peer", metav1.ConditionTrue, ReasonReconciled, func(s *netv1beta1.WgGatewayServerStatus) error {
		return endpointIs(s.Endpoint, 30444, "198.51.100.10")
	})
	t.Logf("gateway pod %s ready", pod)
	e.checkNoWrites(t, ns, "peer", []reconcile.Reconciler{e.wgServer},
		append(gatewayChildren(ns, "peer", true), &netv1beta1.WgGatewayServer{ObjectMeta: objectMeta(ns, "peer")})...)
}

func testWgServerClusterIP(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "wg-server-clusterip")
	wg := newWgServer(ns, "peer", gatewayServiceTemplate("peer", corev1.ServiceTypeClusterIP, 0))
	if err := e.c.Create(ctx, wg); err != nil {
		t.Fatal(err)
	}
	e.waitWgServer(t, ns, "peer", metav1.ConditionFalse, ReasonWaitingForGatewayPod, nil)
	var svc corev1.Service
	if err := e.get(ctx, ns, "gw-peer", &svc); err != nil {
		t.Fatal(err)
	}
	e.waitWgServer(t, ns, "peer", metav1.ConditionFalse, ReasonWaitingForGatewayPod, func(s *netv1beta1.WgGatewayServerStatus) error {
		return endpointIs(s.Endpoint, netv1beta1.DefaultGatewayPort, svc.Spec.ClusterIP)
	})
}

// checkIdentity checks ServiceAccount, Role and RoleBinding gw-<name>: the
// Role grants the gateway pod its own Secret and gateway object, the peer's
// PublicKeys and Configurations, and Connections, nothing else.
func (e *gatewayEnv) checkIdentity(t *testing.T, ns, name, gatewayResource, secretName string) {
	t.Helper()
	ctx := t.Context()
	child := "gw-" + name
	var sa corev1.ServiceAccount
	if err := e.get(ctx, ns, child, &sa); err != nil {
		t.Fatal(err)
	}
	var rb rbacv1.RoleBinding
	if err := e.get(ctx, ns, child, &rb); err != nil {
		t.Fatal(err)
	}
	if rb.RoleRef.Name != child || len(rb.Subjects) != 1 || rb.Subjects[0].Name != child || rb.Subjects[0].Kind != rbacv1.ServiceAccountKind {
		t.Errorf("role binding %+v does not bind role %s to service account %s", rb, child, child)
	}
	var role rbacv1.Role
	if err := e.get(ctx, ns, child, &role); err != nil {
		t.Fatal(err)
	}
	// What the gateway's service account may do, checked by the API server.
	user := "system:serviceaccount:" + ns + ":" + child
	for _, tc := range []struct {
		verb, group, resource, name string
		allowed                     bool
	}{
		{"get", "", "secrets", secretName, true},
		{"get", "", "secrets", "other", false},
		{"list", "", "secrets", "", false},
		{"get", "networking.liqo.io", gatewayResource, name, true},
		{"get", "networking.liqo.io", gatewayResource, "other", false},
		{"watch", "networking.liqo.io", gatewayResource, "", true},
		{"list", "networking.liqo.io", "publickeies", "", true},
		{"watch", "networking.liqo.io", "configurations", "", true},
		{"create", "networking.liqo.io", "connections", "", true},
		{"patch", "networking.liqo.io", "connections", "gw-" + name, true},
		{"delete", "networking.liqo.io", "connections", "gw-" + name, false},
		{"update", "networking.liqo.io", "configurations", "x", false},
		{"create", "", "pods", "", false},
	} {
		if got := e.can(t, user, ns, tc.verb, tc.group, tc.resource, tc.name); got != tc.allowed {
			t.Errorf("%s %s %s/%s %q: allowed=%v, want %v", user, tc.verb, tc.group, tc.resource, tc.name, got, tc.allowed)
		}
	}
}

// checkNoWrites reconciles ns/name once more with each of rs, directly, and
// checks that none of objs (set with their namespace and name) was written.
func (e *gatewayEnv) checkNoWrites(t *testing.T, ns, name string, rs []reconcile.Reconciler, objs ...client.Object) {
	t.Helper()
	snapshot := func() ([]string, error) {
		var rvs []string
		for _, o := range objs {
			if err := e.get(t.Context(), o.GetNamespace(), o.GetName(), o); err != nil {
				return nil, err
			}
			rvs = append(rvs, fmt.Sprintf("%T %s rv %s", o, o.GetName(), o.GetResourceVersion()))
		}
		return rvs, nil
	}
	// Wait until the cluster settles: the Deployment and ReplicaSet
	// controllers update statuses for a while after a pod starts.
	var before []string
	eventually(t, "objects settle", func(ctx context.Context) error {
		a, err := snapshot()
		if err != nil {
			return err
		}
		time.Sleep(2 * time.Second)
		b, err := snapshot()
		if err != nil {
			return err
		}
		if !slices.Equal(a, b) {
			return fmt.Errorf("still changing: %v -> %v", a, b)
		}
		before = b
		return nil
	})
	for _, r := range rs {
		for range 2 {
			e.reconcileAgain(t, r, ns, name)
		}
	}
	after, err := snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("a reconcile with nothing to change wrote:\nbefore %v\nafter  %v", before, after)
	}
}

func testWgServerUserSecret(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "wg-server-user-secret")
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
	if err := e.c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	wg := newWgServer(ns, "peer", gatewayServiceTemplate("peer", corev1.ServiceTypeClusterIP, 0))
	wg.Spec.SecretRef.Name = "mykeys"
	if err := e.c.Create(ctx, wg); err != nil {
		t.Fatal(err)
	}
	stalledWith := func(msg string) func(*netv1beta1.WgGatewayServerStatus) error {
		return func(s *netv1beta1.WgGatewayServerStatus) error {
			c := meta.FindStatusCondition(s.Conditions, netv1beta1.ConditionStalled)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonInvalidKeys || c.Message != msg {
				return fmt.Errorf("stalled condition %+v, want True/%s %q", c, ReasonInvalidKeys, msg)
			}
			return nil
		}
	}
	e.waitWgServer(t, ns, "peer", metav1.ConditionFalse, ReasonInvalidKeys,
		stalledWith("secret "+ns+"/mykeys: data.privateKey must be 32 bytes, got 31"))
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
	e.waitWgServer(t, ns, "peer", metav1.ConditionFalse, ReasonInvalidKeys,
		stalledWith("secret "+ns+"/mykeys: data.publicKey is not the public key of data.privateKey"))

	// Fixed: the gateway goes on and uses the user's Secret.
	secret.Data[netv1beta1.PrivateKeyField] = priv[:]
	if err := e.c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	e.waitWgServer(t, ns, "peer", metav1.ConditionFalse, ReasonWaitingForGatewayPod, func(s *netv1beta1.WgGatewayServerStatus) error {
		if meta.FindStatusCondition(s.Conditions, netv1beta1.ConditionStalled) != nil {
			return fmt.Errorf("still stalled")
		}
		if s.SecretRef == nil || s.SecretRef.Name != "mykeys" {
			return fmt.Errorf("status.secretRef %+v, want mykeys", s.SecretRef)
		}
		return nil
	})
	if err := e.get(ctx, ns, "gw-peer", &dep); err != nil {
		t.Fatal(err)
	}
	if err := e.isGone(ctx, ns, "gw-peer", &corev1.Secret{}); err != nil {
		t.Errorf("a key pair was generated although spec.secretRef names one: %v", err)
	}
	e.checkIdentity(t, ns, "peer", "gatewayservers", "mykeys")
}
