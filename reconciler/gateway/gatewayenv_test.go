package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/templates"
	"github.com/peerlink/peerlink/testkit/ctrltest"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// waitTimeout bounds every wait for the controllers or the cluster.
const waitTimeout = time.Minute

// gatewayEnv is a control plane with kube-controller-manager (garbage
// collector, Deployment and ReplicaSet controllers) and a manager running
// the gateway reconcilers, whose log goes to logs.
type gatewayEnv struct {
	cluster *testcluster.Cluster
	// c talks to the API server directly, without a cache.
	c    client.Client
	logs *ctrltest.SyncBuffer

	wgServer *wgGatewayReconciler[*netv1beta1.WgGatewayServer]
	wgClient *wgGatewayReconciler[*netv1beta1.WgGatewayClient]
	gwServer *gatewayReconciler[*netv1beta1.GatewayServer]
	gwClient *gatewayReconciler[*netv1beta1.GatewayClient]
}

// gatewayOptions are the options of the gateway reconcilers in the
// cluster the tests run in; the default templates live in its namespace.
func gatewayOptions() Options {
	return Options{Namespace: templates.InstallNamespace, ClusterID: "local",
		LocalRanges:   []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.70.0.0/16")},
		UnknownSource: netip.MustParseAddr("10.70.0.0")}
}

// startGatewayEnv starts the cluster and the manager; both stop when t ends.
func startGatewayEnv(t *testing.T) *gatewayEnv {
	t.Helper()
	cluster := ctrltest.StartCluster(t,
		// No kubelet posts node status here: the node lifecycle controller
		// would mark the test's nodes unreachable and their pods not ready.
		testcluster.WithControllerManager("--controllers=*,-node-lifecycle-controller,-taint-eviction-controller"),
		// As strict as clusters that check who may block an owner's deletion.
		testcluster.WithAPIServerFlag("enable-admission-plugins", "OwnerReferencesPermissionEnforcement"),
	)
	env := &gatewayEnv{cluster: cluster, c: cluster.Client, logs: &ctrltest.SyncBuffer{}}
	env.namespace(t, gatewayOptions().Namespace)
	defaults, err := templates.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range defaults {
		if err := env.c.Create(t.Context(), tmpl); err != nil {
			t.Fatalf("install default template %s: %v", tmpl.GetName(), err)
		}
	}

	// The reconcilers run as the controller's service account, with the
	// RBAC of the install bundle: what they need must be granted there.
	for _, f := range []string{"rbac.yaml", "rbac-gateways.yaml", "rbac-services.yaml"} {
		for _, obj := range readManifests(t, filepath.Join("..", "..", "bundles", "install", "controller", f)) {
			if err := env.c.Create(t.Context(), obj); err != nil {
				t.Fatalf("install %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + gatewayOptions().Namespace + ":peerlink-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + gatewayOptions().Namespace, "system:authenticated"},
	}
	stop := ctrltest.StartManager(t, cfg, env.logs, 10, func(mgr ctrl.Manager) error {
		var err error
		if env.wgServer, err = setupWgGateway(mgr, gatewayOptions(), wgGatewayServerKind()); err != nil {
			return err
		}
		if env.wgClient, err = setupWgGateway(mgr, gatewayOptions(), wgGatewayClientKind()); err != nil {
			return err
		}
		if env.gwServer, err = setupGateway(mgr, gatewayOptions(), gatewayServerKind()); err != nil {
			return err
		}
		if env.gwClient, err = setupGateway(mgr, gatewayOptions(), gatewayClientKind()); err != nil {
			return err
		}
		if err := setupIPReaders(mgr); err != nil {
			return err
		}
		// Key rotations promote the next pair without the production wait.
		env.gwServer.promoteDelay, env.gwClient.promoteDelay = 2*time.Second, 2*time.Second
		env.gwServer.rotationPatience, env.gwClient.rotationPatience = 8*time.Second, 8*time.Second
		return nil
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			t.Logf("controller log:\n%s", env.logs.Bytes())
		}
	})
	return env
}

// TestGateways runs the tests of the gateway reconcilers against one
// control plane, each in a namespace of its own: starting one per test would
// multiply the run time. A test both kinds of a pair run runs once per kind.
func TestGateways(t *testing.T) {
	e := startGatewayEnv(t)
	wgServer, wgClient := wgServerCase(e), wgClientCase(e)
	gwServer, gwClient := gatewayServerCase(e), gatewayClientCase(e)
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"wg server", func(t *testing.T) { testWgGateway(t, e, wgServer) }},
		{"wg client", func(t *testing.T) { testWgGateway(t, e, wgClient) }},
		{"wg server cluster ip", func(t *testing.T) { testWgServerClusterIP(t, e) }},
		{"wg server moves its node port", func(t *testing.T) { testWgServerMove(t, e) }},
		{"wg server user secret", func(t *testing.T) { testWgUserSecret(t, e, wgServer) }},
		{"wg client user secret", func(t *testing.T) { testWgUserSecret(t, e, wgClient) }},
		{"gateway server", func(t *testing.T) { testGateway(t, e, gwServer) }},
		{"gateway client", func(t *testing.T) { testGateway(t, e, gwClient) }},
		{"gateway server allocated node port", func(t *testing.T) { testGatewayServerAllocatedNodePort(t, e) }},
		{"gateway server load balancer", func(t *testing.T) { testGatewayServerLoadBalancer(t, e) }},
		{"gateway server template change", func(t *testing.T) { testGatewayServerTemplateChange(t, e) }},
		{"gateway replicas roll out", func(t *testing.T) { testGatewayReplicasStrategy(t, e) }},
		{"gateway client endpoint ports", func(t *testing.T) { testGatewayClientPorts(t, e) }},
		{"gateway server bad input", func(t *testing.T) { testGatewayBadInput(t, e, gwServer) }},
		{"gateway client bad input", func(t *testing.T) { testGatewayBadInput(t, e, gwClient) }},
		{"one gateway per peer", func(t *testing.T) { testDuplicateGateway(t, e) }},
		{"gateway server template in liqo's namespace", func(t *testing.T) { testTemplateFromLiqoNamespace(t, e, gwServer) }},
		{"gateway client template in liqo's namespace", func(t *testing.T) { testTemplateFromLiqoNamespace(t, e, gwClient) }},
		{"liqo's service account name", func(t *testing.T) { testLiqoServiceAccount(t, e) }},
		{"templates reach only what a gateway needs", func(t *testing.T) { testTemplateReach(t, e) }},
		{"no foreign object is adopted", func(t *testing.T) { testNoAdoption(t, e) }},
		{"gateway server deletion", func(t *testing.T) { testGatewayServerDeletion(t, e) }},
		{"key rotation", func(t *testing.T) { testKeyRotation(t, e) }},
		{"gateways read the IPs of every namespace", func(t *testing.T) { testIPReaders(t, e, wgServer, wgClient) }},
		{"key promotion waits for the rendered key", func(t *testing.T) { testPromotionWaitsForRenderedKey(t, e) }},
		// Last, so that every other test's objects are searched too.
		{"keys confined", func(t *testing.T) { testKeysConfined(t, e) }},
	} {
		t.Run(tc.name, tc.run)
	}
}

// readManifests reads the objects of a multi-document YAML file.
func readManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// namespace creates a namespace for one test.
func (e *gatewayEnv) namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

// create creates obj, failing t when it cannot.
func (e *gatewayEnv) create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := e.c.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

// peerMeta is the metadata of object ns/name connecting peer id; without
// the remote-cluster-id label when id is empty.
func peerMeta(ns, name, id string) metav1.ObjectMeta {
	m := objectMeta(ns, name)
	if id != "" {
		m.Labels = map[string]string{netv1beta1.RemoteClusterIDLabel: id}
	}
	return m
}

// waitReady waits until object ns/name of the kind reports, for its
// current generation, the Ready condition status and reason given, and
// check (nil: none) accepts it; it returns the object.
func (k objectKind[T]) waitReady(t *testing.T, e *gatewayEnv, ns, name string, ready metav1.ConditionStatus, reason string,
	check func(T) error) T {
	t.Helper()
	obj := k.newObject()
	eventually(t, fmt.Sprintf("%s %s/%s Ready=%s/%s", k.name, ns, name, ready, reason), func(ctx context.Context) error {
		if err := e.get(ctx, ns, name, obj); err != nil {
			return err
		}
		s := k.status(obj).common
		if s.ObservedGeneration != obj.GetGeneration() {
			return fmt.Errorf("status describes generation %d, want %d", s.ObservedGeneration, obj.GetGeneration())
		}
		if err := conditionIs(s.Conditions, obj.GetGeneration(), netv1beta1.ConditionReady, ready, reason); err != nil {
			return err
		}
		if check != nil {
			return check(obj)
		}
		return nil
	})
	return obj
}

// named returns an empty object of the kind named ns/name.
func (k objectKind[T]) named(ns, name string) T {
	obj := k.newObject()
	obj.SetNamespace(ns)
	obj.SetName(name)
	return obj
}

// defaultTemplate is a fresh copy of the i-th default template (0 the
// server's, 1 the client's), as ns/name.
func defaultTemplate(t *testing.T, i int, ns, name string) *unstructured.Unstructured {
	t.Helper()
	defaults, err := templates.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := defaults[i]
	tmpl.SetNamespace(ns)
	tmpl.SetName(name)
	return tmpl
}

// eventually polls cond until it returns nil, failing t with its last error
// after waitTimeout.
func eventually(t *testing.T, what string, cond func(ctx context.Context) error) {
	t.Helper()
	ctrltest.Eventually(t, waitTimeout, what, cond)
}

// get reads an object by namespace and name into obj.
func (e *gatewayEnv) get(ctx context.Context, ns, name string, obj client.Object) error {
	return e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
}

// conditionIs checks that conds hold condType with status s and reason, for
// generation gen.
func conditionIs(conds []metav1.Condition, gen int64, condType string, s metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(conds, condType)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition in %+v", condType, conds)
	case c.Status != s || c.Reason != reason:
		return fmt.Errorf("%s is %s/%s (%s), want %s/%s", condType, c.Status, c.Reason, c.Message, s, reason)
	case c.ObservedGeneration != gen:
		return fmt.Errorf("%s describes generation %d, want %d", condType, c.ObservedGeneration, gen)
	}
	return nil
}

// gatewayPodTemplate is a Deployment running a gateway pod with the labels
// the reconcilers select active gateway pods by.
func gatewayPodTemplate(name string, args ...string) netv1beta1.DeploymentTemplate {
	labels := map[string]string{
		"app.kubernetes.io/name":      "peerlink-gateway",
		netv1beta1.GatewayNameLabel:   name,
		netv1beta1.ActiveGatewayLabel: "true",
	}
	return netv1beta1.DeploymentTemplate{
		Metadata: netv1beta1.TemplateMetadata{Labels: map[string]string{"app.kubernetes.io/name": "peerlink-gateway"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{netv1beta1.GatewayNameLabel: name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "gateway",
						Image: "ghcr.io/peerlink/peerlink-agent:latest",
						Args:  args,
					}},
				},
			},
		},
	}
}

// gatewayServiceTemplate is a Service of the given type exposing the gateway.
func gatewayServiceTemplate(name string, typ corev1.ServiceType, nodePort int32) netv1beta1.ServiceTemplate {
	return netv1beta1.ServiceTemplate{
		Spec: corev1.ServiceSpec{
			Type: typ,
			Selector: map[string]string{
				netv1beta1.GatewayNameLabel:   name,
				netv1beta1.ActiveGatewayLabel: "true",
			},
			Ports: []corev1.ServicePort{{
				Name:       "wireguard",
				Port:       netv1beta1.DefaultGatewayPort,
				TargetPort: intstr.FromInt32(netv1beta1.DefaultGatewayPort),
				Protocol:   corev1.ProtocolUDP,
				NodePort:   nodePort,
			}},
		},
	}
}

// runGatewayPod does what the scheduler and a kubelet would for the pod the
// gateway Deployment gw-<name> created: binds it to node and reports it
// Running and Ready with ip. It returns the pod's name.
func (e *gatewayEnv) runGatewayPod(t *testing.T, ns, name, node, ip string) string {
	t.Helper()
	ctx := t.Context()
	var pod corev1.Pod
	eventually(t, "gateway pod created by its Deployment", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := e.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{netv1beta1.GatewayNameLabel: name}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods, want 1", len(pods.Items))
		}
		pod = pods.Items[0]
		return nil
	})
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := e.c.SubResource("binding").Create(ctx, &pod, binding); err != nil {
		t.Fatalf("bind pod %s to node %s: %v", pod.Name, node, err)
	}
	if err := e.get(ctx, ns, pod.Name, &pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	pod.Status.StartTime = &now
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	if err := e.c.Status().Update(ctx, &pod); err != nil {
		t.Fatalf("report pod %s running: %v", pod.Name, err)
	}
	return pod.Name
}

// runImpostorPod creates a pod with the labels of gateway name's pods but
// made by no Deployment, Running and Ready on node with ip, and waits until
// pods, the pod cache of a gateway reconciler, holds it.
func (e *gatewayEnv) runImpostorPod(t *testing.T, pods client.Reader, ns, name, node, ip string) {
	t.Helper()
	ctx := t.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "impostor", Namespace: ns, Labels: map[string]string{
			netv1beta1.GatewayNameLabel:   name,
			netv1beta1.ActiveGatewayLabel: "true",
		}},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "gateway", Image: "ghcr.io/peerlink/peerlink-agent:latest"}},
		},
	}
	if err := e.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
	}
	if err := e.c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the impostor pod in the reconcilers' cache", func(ctx context.Context) error {
		var got corev1.Pod
		if err := pods.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
			return err
		}
		if got.Status.PodIP != ip {
			return fmt.Errorf("cached pod has no IP yet")
		}
		return nil
	})
}

// reconcileAgain runs r once on ns/name.
func (e *gatewayEnv) reconcileAgain(t *testing.T, r reconcile.Reconciler, ns, name string) {
	t.Helper()
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}); err != nil {
		t.Fatalf("reconcile %T: %v", r, err)
	}
}

// createNode creates a Node with the given addresses, as a kubelet would.
func (e *gatewayEnv) createNode(t *testing.T, name string, addrs ...corev1.NodeAddress) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.c.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	e.setNodeAddresses(t, name, addrs...)
}

// setNodeAddresses sets the addresses of a Node, as its kubelet would.
func (e *gatewayEnv) setNodeAddresses(t *testing.T, name string, addrs ...corev1.NodeAddress) {
	t.Helper()
	// The controller manager annotates new nodes meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var node corev1.Node
		if err := e.get(t.Context(), "", name, &node); err != nil {
			return err
		}
		node.Status.Addresses = addrs
		return e.c.Status().Update(t.Context(), &node)
	})
	if err != nil {
		t.Fatalf("report addresses of node %s: %v", name, err)
	}
}

// checkKeySecret checks that Secret ns/name holds a valid generated key pair
// carrying the labels of a gateway key Secret, and returns it.
func (e *gatewayEnv) checkKeySecret(t *testing.T, ns, name, clusterID string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := e.get(t.Context(), ns, name, &s); err != nil {
		t.Fatal(err)
	}
	if _, err := validateKeys(&s); err != nil {
		t.Errorf("generated secret: %v", err)
	}
	if got := s.Labels[netv1beta1.RemoteClusterIDLabel]; got != clusterID {
		t.Errorf("secret label %s = %q, want %q", netv1beta1.RemoteClusterIDLabel, got, clusterID)
	}
	if got := s.Labels[netv1beta1.GatewayResourceLabel]; got != "true" {
		t.Errorf("secret label %s = %q, want true", netv1beta1.GatewayResourceLabel, got)
	}
	return &s
}

// objectMeta is the metadata naming ns/name.
func objectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}

// gatewayChildren are the objects made for gateway ns/name, empty but for
// their names: Deployment, ServiceAccount, Role, RoleBinding, key Secret and,
// for a server, Service.
func gatewayChildren(ns, name string, server bool) []client.Object {
	m := objectMeta(ns, "gw-"+name)
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: m},
		&corev1.ServiceAccount{ObjectMeta: m},
		&rbacv1.Role{ObjectMeta: m},
		&rbacv1.RoleBinding{ObjectMeta: m},
		&corev1.Secret{ObjectMeta: m},
	}
	if server {
		objs = append(objs, &corev1.Service{ObjectMeta: m})
	}
	return objs
}

// can asks the API server whether user, a service account of namespace ns,
// may do verb on a resource there.
func (e *gatewayEnv) can(t *testing.T, user, ns, verb, group, resource, name string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: group, Resource: resource, Name: name,
			},
		},
	}
	if err := e.c.Create(t.Context(), sar); err != nil {
		t.Fatalf("subject access review: %v", err)
	}
	return sar.Status.Allowed
}

// isGone reports nil once an object no longer exists.
func (e *gatewayEnv) isGone(ctx context.Context, ns, name string, obj client.Object) error {
	err := e.get(ctx, ns, name, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%T %s/%s still exists (deletionTimestamp %v, finalizers %v)",
		obj, ns, name, obj.GetDeletionTimestamp(), obj.GetFinalizers())
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
