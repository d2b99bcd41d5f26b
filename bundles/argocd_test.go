package bundles

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/api"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/kbuild"
	"github.com/peerlink/peerlink/reconciler"
	"github.com/peerlink/peerlink/reconciler/configuration"
	"github.com/peerlink/peerlink/reconciler/gateway"
	"github.com/peerlink/peerlink/reconciler/outcome"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

const (
	// healthKeyPrefix starts the argocd-cm keys of Lua health checks; the
	// kind follows as <group>_<Kind>.
	healthKeyPrefix = "resource.customizations.health."
	// argoWait bounds every wait for the controller or the cluster.
	argoWait = time.Minute
	// installNamespace is the namespace of bundles/install.
	installNamespace = "peerlink"
	// extrasNamespace holds the objects of the states the example bundles
	// do not reach.
	extrasNamespace = "liqo-tenant-extras"
)

// readHealthChecks returns the Lua health checks of
// examples/argocd/argocd-cm.yaml by the kind they judge.
func readHealthChecks(t *testing.T) map[schema.GroupKind]string {
	t.Helper()
	path := filepath.Join("examples", "argocd", "argocd-cm.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	checks := map[schema.GroupKind]string{}
	for key, script := range cm.Data {
		groupKind, ok := strings.CutPrefix(key, healthKeyPrefix)
		if !ok {
			continue
		}
		group, kind, ok := strings.Cut(groupKind, "_")
		if !ok || group == "" || kind == "" {
			t.Fatalf("%s: key %s is not %s<group>_<Kind>", path, key, healthKeyPrefix)
		}
		checks[schema.GroupKind{Group: group, Kind: kind}] = script
	}
	if len(checks) == 0 {
		t.Fatalf("%s holds no %s keys", path, healthKeyPrefix)
	}
	return checks
}

// TestArgoCDKstatusChecksAlike holds the checks of the kinds that carry
// kstatus conditions to one script, as argocd-cm.yaml and docs/gitops.md
// say: Argo CD takes a key per kind, and a fix to one is a fix to all.
func TestArgoCDKstatusChecksAlike(t *testing.T) {
	checks := readHealthChecks(t)
	conf := checks[netv1beta1.GroupVersion.WithKind("Configuration").GroupKind()]
	if conf == "" {
		t.Fatal("argocd-cm has no health check for Configuration")
	}
	for _, kind := range []string{"GatewayServer", "GatewayClient"} {
		if got := checks[netv1beta1.GroupVersion.WithKind(kind).GroupKind()]; got != conf {
			t.Errorf("the health check of %s differs from that of Configuration:\n%s", kind, got)
		}
	}
}

// healthCase is an object read from the API server and the health its
// check must give it.
type healthCase struct {
	state  string
	obj    *unstructured.Unstructured
	status string
	// message is a regular expression the whole message must match.
	message string
}

// argoEnv is a control plane with bundles/install applied, where the
// peerlink controller runs in this process when started.
type argoEnv struct {
	cluster *testcluster.Cluster
	c       client.Client
	cases   []healthCase

	// stopController stops the controller while it runs, else is nil.
	stopController func()
}

// TestArgoCDHealthChecks runs the Lua health checks that
// examples/argocd/argocd-cm.yaml gives Argo CD on objects read from a real
// API server: the example peer bundles, applied as an Application syncs
// them, before the peerlink controller saw them, while they wait, once
// Ready and once changed behind the controller's back; objects the
// controller stalls; and a Connection in each state the gateway agent
// reports. Every check must have objects in which it answers Progressing,
// Healthy and Degraded.
func TestArgoCDHealthChecks(t *testing.T) {
	checks := readHealthChecks(t)
	e := startArgoEnv(t)
	ctx := t.Context()

	// The two example bundles, synced before the controller runs. Its
	// cluster ID is neither cluster-a nor cluster-b, so it takes them for
	// two peers.
	for _, dir := range []string{"examples/cluster-a/peer-cluster-b", "examples/cluster-b/peer-cluster-a"} {
		objs, err := kbuild.Build(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			// As Argo CD with ServerSideApply=true.
			if err := e.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("argocd-controller")); err != nil {
				t.Fatalf("apply %s %s of %s: %v", obj.GetKind(), obj.GetName(), dir, err)
			}
		}
	}
	// Objects the controller will stall, and a client whose peer's file has
	// not come yet.
	e.createNamespace(t, extrasNamespace)
	extras := []client.Object{
		&netv1beta1.Configuration{
			ObjectMeta: peerMeta("refused", "cluster-r"),
			Spec: netv1beta1.ConfigurationSpec{Remote: netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{
				Pod: []netv1beta1.CIDR{"10.246.0.0/16"}, External: []netv1beta1.CIDR{"8.8.8.0/24"},
			}}},
		},
		&netv1beta1.GatewayServer{
			ObjectMeta: peerMeta("no-template", "cluster-s"),
			Spec:       netv1beta1.GatewayServerSpec{ServerTemplateRef: corev1.ObjectReference{Name: "missing"}},
		},
		&netv1beta1.GatewayClient{
			ObjectMeta: peerMeta("no-template", "cluster-t"),
			Spec:       netv1beta1.GatewayClientSpec{ClientTemplateRef: corev1.ObjectReference{Name: "missing"}},
		},
		&netv1beta1.GatewayClient{ObjectMeta: peerMeta("no-endpoint", "cluster-u")},
	}
	for _, obj := range extras {
		if err := e.c.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}

	// The objects of the bundles, by namespace/name: cluster-a's bundle for
	// peer cluster-b holds its Configuration and a GatewayClient, and
	// cluster-b's for peer cluster-a its Configuration and a GatewayServer.
	const (
		peerB = "liqo-tenant-cluster-b/cluster-b"
		peerA = "liqo-tenant-cluster-a/cluster-a"
	)
	waiting := "waiting for the peerlink controller"
	e.record(t, "no status yet", e.read(t, "Configuration", peerB), "Progressing", waiting)
	e.record(t, "no status yet", e.read(t, "GatewayServer", peerA), "Progressing", waiting)
	e.record(t, "no status yet", e.read(t, "GatewayClient", peerB), "Progressing", waiting)

	e.startController(t)

	e.record(t, "ready", e.waitReason(t, "Configuration", peerB, outcome.ReasonReconciled), "Healthy",
		`remote CIDRs 10\.244\.0\.0/24 remapped to [0-9./]+, 10\.70\.0\.0/16 remapped to [0-9./]+`)
	e.record(t, "refused CIDR", e.waitReason(t, "Configuration", extrasNamespace+"/refused", configuration.ReasonRefusedCIDR), "Degraded",
		`RefusedCIDR: spec\.remote\.cidr\.external\[0\]: 8\.8\.8\.0/24 refused \(NotAllowed\): outside the allowed peer ranges .+`)

	e.record(t, "waiting for its pod", e.waitReason(t, "GatewayServer", peerA, gateway.ReasonWaitingForGatewayPod), "Progressing",
		`WaitingForGatewayPod: WgGatewayServer liqo-tenant-cluster-a/cluster-a: no gateway pod runs: the node port is reached through its node`)
	e.record(t, "template not found", e.waitReason(t, "GatewayServer", extrasNamespace+"/no-template", gateway.ReasonTemplateNotFound), "Degraded",
		`TemplateNotFound: spec\.serverTemplateRef: WgGatewayServerTemplate peerlink/missing not found`)

	e.record(t, "waiting for its pod", e.waitReason(t, "GatewayClient", peerB, gateway.ReasonWaitingForGatewayPod), "Progressing",
		`WaitingForGatewayPod: WgGatewayClient liqo-tenant-cluster-b/cluster-b: no running pod labelled networking\.liqo\.io/gateway-name=cluster-b,networking\.liqo\.io/active=true`)
	e.record(t, "waiting for the endpoint", e.waitReason(t, "GatewayClient", extrasNamespace+"/no-endpoint", netv1beta1.ReasonWaitingForEndpoint), "Progressing",
		`WaitingForEndpoint: spec\.endpoint\.addresses and spec\.endpoint\.port: the address and port of the peer's gateway server are not known yet`)
	e.record(t, "template not found", e.waitReason(t, "GatewayClient", extrasNamespace+"/no-template", gateway.ReasonTemplateNotFound), "Degraded",
		`TemplateNotFound: spec\.clientTemplateRef: WgGatewayClientTemplate peerlink/missing not found`)

	// The gateway pods start.
	e.createNode(t, "node-1", "192.0.2.10")
	e.runGatewayPod(t, peerA, "node-1", "10.244.0.10")
	e.runGatewayPod(t, peerB, "node-1", "10.244.0.11")
	e.record(t, "ready", e.waitReason(t, "GatewayServer", peerA, outcome.ReasonReconciled), "Healthy",
		`WgGatewayServer liqo-tenant-cluster-a/cluster-a: gateway pod gw-cluster-a-[a-z0-9-]+ on node node-1, reachable at 192\.0\.2\.10 port 30851`)
	e.record(t, "ready", e.waitReason(t, "GatewayClient", peerB, outcome.ReasonReconciled), "Healthy",
		`WgGatewayClient liqo-tenant-cluster-b/cluster-b: gateway pod gw-cluster-b-[a-z0-9-]+ on node node-1`)
	e.waitReason(t, "Configuration", peerA, outcome.ReasonReconciled)

	// A commit changes the specs while the controller is down: the statuses
	// describe the generation before.
	e.stopController()
	stale := "waiting for the peerlink controller to observe generation 2"
	e.record(t, "generation not observed", e.update(t, "Configuration", peerA, func(u *unstructured.Unstructured) error {
		return unstructured.SetNestedStringSlice(u.Object, []string{"10.244.0.0/24", "10.245.0.0/24"}, "spec", "remote", "cidr", "pod")
	}), "Progressing", stale)
	for _, gw := range []struct{ kind, key string }{{"GatewayServer", peerA}, {"GatewayClient", peerB}} {
		e.record(t, "generation not observed", e.update(t, gw.kind, gw.key, func(u *unstructured.Unstructured) error {
			return unstructured.SetNestedField(u.Object, int64(1380), "spec", "mtu")
		}), "Progressing", stale)
	}

	e.recordConnections(t, peerB)

	seen := map[schema.GroupKind]map[string]bool{}
	for _, tc := range e.cases {
		gk := tc.obj.GroupVersionKind().GroupKind()
		t.Run(gk.Kind+"/"+tc.state, func(t *testing.T) {
			script, ok := checks[gk]
			if !ok {
				t.Fatalf("argocd-cm has no health check for %s", gk)
			}
			got, err := runHealthCheck(script, tc.obj.Object)
			if err != nil {
				t.Fatalf("health check of %s: %v\nobject: %v", gk, err, tc.obj.Object)
			}
			t.Logf("%s: %s", got.Status, got.Message)
			if got.Status != tc.status || !regexp.MustCompile(`^(?:`+tc.message+`)$`).MatchString(got.Message) {
				t.Errorf("health %s %q, want %s matching %q\nstatus: %v", got.Status, got.Message, tc.status, tc.message, tc.obj.Object["status"])
			}
		})
		if seen[gk] == nil {
			seen[gk] = map[string]bool{}
		}
		seen[gk][tc.status] = true
	}
	for _, gk := range slices.SortedFunc(maps.Keys(checks), func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) }) {
		for _, status := range []string{"Progressing", "Healthy", "Degraded"} {
			if !seen[gk][status] {
				t.Errorf("the health check of %s never answered %s: add an object in that state", gk, status)
			}
		}
	}
}

// peerMeta is the metadata of an extra object connecting remote cluster id.
func peerMeta(name, id string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: extrasNamespace, Name: name, Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: id}}
}

// recordConnections goes through the life of the Connection of the gateway
// key (namespace/name) as the gateway agent reports it: created without a
// status, connecting, connected with a latency, then pings unanswered. No
// agent runs here (it needs a tunnel): the status fields the check reads,
// value and latency, are written as the agent writes them.
func (e *argoEnv) recordConnections(t *testing.T, key string) {
	t.Helper()
	ns, gw, _ := strings.Cut(key, "/")
	conn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": netv1beta1.GroupVersion.String(),
		"kind":       "Connection",
		"metadata": map[string]any{
			"namespace": ns, "name": netv1beta1.GatewayObjectPrefix + gw,
			"labels": map[string]any{netv1beta1.RemoteClusterIDLabel: "cluster-b"},
		},
		"spec": map[string]any{
			"type":       string(netv1beta1.ConnectionTypeClient),
			"gatewayRef": map[string]any{"apiVersion": netv1beta1.GroupVersion.String(), "kind": "GatewayClient", "namespace": ns, "name": gw},
		},
	}}
	if err := e.c.Create(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	name := ns + "/" + conn.GetName()
	e.record(t, "no status yet", e.read(t, "Connection", name), "Progressing", "waiting for the gateway agent")
	for _, step := range []struct {
		state, value, latency string
		status, message       string
	}{
		{"connecting", "Connecting", "", "Progressing", "tunnel Connecting"},
		{"connected", "Connected", "1.25ms", "Healthy", `tunnel connected, latency 1\.25ms`},
		{"pings unanswered", "Error", "1.25ms", "Degraded", "health pings unanswered: tunnel down"},
	} {
		status := map[string]any{"observedGeneration": conn.GetGeneration(), "value": step.value}
		if step.latency != "" {
			status["latency"] = map[string]any{"value": step.latency, "timestamp": time.Now().UTC().Format(time.RFC3339)}
		}
		conn.Object["status"] = status
		if err := e.c.Status().Update(t.Context(), conn); err != nil {
			t.Fatalf("write status of Connection %s: %v", name, err)
		}
		e.record(t, step.state, e.read(t, "Connection", name), step.status, step.message)
	}
}

// startArgoEnv starts a control plane with kube-controller-manager, for
// the gateways' Deployments, and bundles/install applied; the controller is
// started apart.
func startArgoEnv(t *testing.T) *argoEnv {
	t.Helper()
	objs, err := kbuild.Build("install")
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	// The install bundle's CRDs are waited for until established.
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cluster := testcluster.Start(t,
		testcluster.WithScheme(scheme),
		testcluster.WithObjects(objs...),
		// No kubelet reports on the nodes: the node lifecycle controller
		// would take their pods for lost.
		testcluster.WithControllerManager("--controllers=*,-node-lifecycle-controller,-taint-eviction-controller"),
	)
	e := &argoEnv{cluster: cluster, c: cluster.Client}
	t.Cleanup(func() {
		if e.stopController != nil {
			e.stopController()
		}
	})
	return e
}

// startController runs the reconcilers of `peerlink-agent controller` in
// this process, as the service account of bundles/install with the
// permissions the bundle grants it, logging to t.
func (e *argoEnv) startController(t *testing.T) {
	t.Helper()
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(e.cluster.Config)
	cfg.Impersonate.UserName = "system:serviceaccount:" + installNamespace + ":peerlink-controller"
	cfg.Impersonate.Groups = []string{"system:authenticated", "system:serviceaccounts", "system:serviceaccounts:" + installNamespace}
	opts := ctrl.Options{Scheme: scheme, HealthProbeBindAddress: "0"}
	opts.Logger = funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{})
	opts.Metrics.BindAddress = "0"
	// go test -count runs the test again in this process.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	prefix := netip.MustParsePrefix
	facts := reconciler.ClusterFacts{Namespace: installNamespace}
	facts.ClusterID = "hub"
	facts.PodCIDRs = []netip.Prefix{prefix("10.244.0.0/16")}
	facts.ServiceCIDR, facts.ExternalCIDR, facts.InternalCIDR = prefix("10.96.0.0/12"), prefix("10.70.0.0/16"), prefix("10.80.0.0/16")
	if err := reconciler.SetupAll(mgr, facts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	e.stopController = func() {
		e.stopController = nil
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	}
}

// record adds a case: the check of obj's kind must answer status, with a
// message matching the regular expression message.
func (e *argoEnv) record(t *testing.T, state string, obj *unstructured.Unstructured, status, message string) {
	t.Helper()
	e.cases = append(e.cases, healthCase{state: state, obj: obj, status: status, message: message})
}

// get reads the object of kind at key (namespace/name) from the API
// server, decoded from its JSON as Argo CD's cache decodes it.
func (e *argoEnv) get(ctx context.Context, kind, key string) (*unstructured.Unstructured, error) {
	ns, name, _ := strings.Cut(key, "/")
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(netv1beta1.GroupVersion.WithKind(kind))
	return u, e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
}

func (e *argoEnv) read(t *testing.T, kind, key string) *unstructured.Unstructured {
	t.Helper()
	u, err := e.get(t.Context(), kind, key)
	if err != nil {
		t.Fatalf("read %s %s: %v", kind, key, err)
	}
	return u
}

// waitReason reads the object of kind at key until its status describes
// its generation with a Ready condition of the given reason, and returns it.
func (e *argoEnv) waitReason(t *testing.T, kind, key, reason string) *unstructured.Unstructured {
	t.Helper()
	var (
		u    *unstructured.Unstructured
		last error
	)
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, argoWait, true, func(ctx context.Context) (bool, error) {
		u, last = e.get(ctx, kind, key)
		if last == nil {
			last = readyReasonIs(u, reason)
		}
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s %s with reason %s: %v (last: %v)", kind, key, reason, err, last)
	}
	return u
}

// readyReasonIs checks that u's status is of its generation and holds a
// Ready condition with reason.
func readyReasonIs(u *unstructured.Unstructured, reason string) error {
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed != u.GetGeneration() {
		return fmt.Errorf("status describes generation %d, want %d", observed, u.GetGeneration())
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if c, ok := c.(map[string]any); ok && c["type"] == netv1beta1.ConditionReady {
			if c["reason"] != reason {
				return fmt.Errorf("Ready is %v/%v (%v)", c["status"], c["reason"], c["message"])
			}
			return nil
		}
	}
	return fmt.Errorf("no Ready condition in %v", conds)
}

// update changes the spec of the object of kind at key with change and
// returns the object the API server stored.
func (e *argoEnv) update(t *testing.T, kind, key string, change func(*unstructured.Unstructured) error) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if u, err = e.get(t.Context(), kind, key); err != nil {
			return err
		}
		if err := change(u); err != nil {
			return err
		}
		return e.c.Update(t.Context(), u)
	})
	if err != nil {
		t.Fatalf("update %s %s: %v", kind, key, err)
	}
	return e.read(t, kind, key)
}

func (e *argoEnv) createNamespace(t *testing.T, name string) {
	t.Helper()
	if err := e.c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// createNode registers a node with an internal address, as its kubelet
// would.
func (e *argoEnv) createNode(t *testing.T, name, address string) {
	t.Helper()
	if err := e.c.Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	// The controller manager may annotate the node meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := e.c.Get(t.Context(), client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: address}}
		return e.c.Status().Update(t.Context(), node)
	})
	if err != nil {
		t.Fatalf("report the address of node %s: %v", name, err)
	}
}

// runGatewayPod stands in for the scheduler and the kubelet: it binds the
// pod the Deployment of gateway key (namespace/name) made to node, then
// reports it Running and Ready at ip.
func (e *argoEnv) runGatewayPod(t *testing.T, key, node, ip string) {
	t.Helper()
	ns, gw, _ := strings.Cut(key, "/")
	pod := &corev1.Pod{}
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, argoWait, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := e.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{netv1beta1.GatewayNameLabel: gw})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		*pod = pods.Items[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("no pod of gateway %s: %v", key, err)
	}
	bind := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := e.c.SubResource("binding").Create(t.Context(), pod, bind); err != nil {
		t.Fatalf("schedule pod %s of gateway %s: %v", pod.Name, key, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		started := metav1.Now()
		pod.Status = corev1.PodStatus{
			Phase:      corev1.PodRunning,
			StartTime:  &started,
			PodIP:      ip,
			PodIPs:     []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}},
		}
		return e.c.Status().Update(t.Context(), pod)
	})
	if err != nil {
		t.Fatalf("start pod %s of gateway %s: %v", pod.Name, key, err)
	}
}
