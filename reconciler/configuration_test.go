package reconciler

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/reconciler/configuration"
	"github.com/peerlink/peerlink/reconciler/outcome"
	"github.com/peerlink/peerlink/templates"
	"github.com/peerlink/peerlink/testkit/ctrltest"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// confWaitTimeout bounds every wait for the controller.
const confWaitTimeout = time.Minute

// testFacts are the local facts of the tests: the peer uses the same pod
// CIDR and the same default external CIDR. The admin declared the private
// and shared ranges as the address plan for peers, so that a free range is
// routed as it is (TestConfigurationWithoutPlan runs without one).
func testFacts() ClusterFacts {
	return ClusterFacts{
		Info: clusterinfo.Info{
			ClusterID:         "local",
			PodCIDRs:          []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
			ServiceCIDR:       netip.MustParsePrefix("10.96.0.0/12"),
			ExternalCIDR:      netip.MustParsePrefix("10.70.0.0/16"),
			InternalCIDR:      netip.MustParsePrefix("10.80.0.0/16"),
			RoutedPeer:        cidr.MustPrefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"),
			ControllerVersion: "v0.3.0",
		},
		Namespace: "peerlink",
	}
}

// confEnv is a control plane and the controller, as SetupAll registers it,
// running in a manager of this process.
type confEnv struct {
	cluster *testcluster.Cluster
	facts   ClusterFacts

	// wrap, when set, wraps the controller's transport to the API server.
	wrap func(http.RoundTripper) http.RoundTripper
	// stop stops the running manager.
	stop func() error
	logs ctrltest.SyncBuffer
}

// startController runs a new manager with SetupAll against the cluster. It
// runs until stopController or the end of the test.
func (e *confEnv) startController(t *testing.T) {
	t.Helper()
	cfg := rest.CopyConfig(e.cluster.Config)
	cfg.WrapTransport = e.wrap
	e.stop = ctrltest.StartManager(t, cfg, &e.logs, 1, func(mgr ctrl.Manager) error {
		return SetupAll(mgr, e.facts)
	})
}

// stopController stops the running manager and waits for it to return.
func (e *confEnv) stopController(t *testing.T) {
	t.Helper()
	if e.stop == nil {
		return
	}
	if err := e.stop(); err != nil {
		t.Errorf("manager: %v", err)
	}
	e.stop = nil
}

func (e *confEnv) createNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.cluster.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
}

// newConf builds a Configuration of peer id (no label when id is empty).
func newConf(ns, name, id string, pod []string, external ...string) *netv1beta1.Configuration {
	c := &netv1beta1.Configuration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if id != "" {
		c.Labels = map[string]string{netv1beta1.RemoteClusterIDLabel: id}
	}
	for _, p := range pod {
		c.Spec.Remote.CIDR.Pod = append(c.Spec.Remote.CIDR.Pod, netv1beta1.CIDR(p))
	}
	for _, p := range external {
		c.Spec.Remote.CIDR.External = append(c.Spec.Remote.CIDR.External, netv1beta1.CIDR(p))
	}
	return c
}

func (e *confEnv) create(t *testing.T, c *netv1beta1.Configuration) {
	t.Helper()
	if err := e.cluster.Client.Create(t.Context(), c); err != nil {
		t.Fatalf("create configuration %s/%s: %v", c.Namespace, c.Name, err)
	}
}

func (e *confEnv) get(t *testing.T, ns, name string) *netv1beta1.Configuration {
	t.Helper()
	var c netv1beta1.Configuration
	if err := e.cluster.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// waitConf polls Configuration ns/name until check accepts it, for its
// current generation.
func (e *confEnv) waitConf(t *testing.T, ns, name, what string, check func(*netv1beta1.Configuration) error) *netv1beta1.Configuration {
	t.Helper()
	return waitStatus(t, e, &netv1beta1.Configuration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		func(c *netv1beta1.Configuration) *netv1beta1.CommonStatus { return &c.Status.CommonStatus }, what, check)
}

// waitStatus polls obj, named by its namespace and name, until check
// accepts it, for its current generation; common points at its kstatus.
func waitStatus[T client.Object](t *testing.T, e *confEnv, obj T, common func(T) *netv1beta1.CommonStatus, what string, check func(T) error) T {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, confWaitTimeout, true, func(ctx context.Context) (bool, error) {
		if err := e.cluster.Client.Get(ctx, key, obj); err != nil {
			last = err
			return false, nil
		}
		if g := common(obj).ObservedGeneration; g != obj.GetGeneration() {
			last = fmt.Errorf("status describes generation %d, want %d", g, obj.GetGeneration())
			return false, nil
		}
		last = check(obj)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%T %s %s: %v (last: %v)", obj, key, what, err, last)
	}
	return obj
}

// waitRemapped waits until ns/name is Ready with the pod and external
// ranges given in status.remote.
func (e *confEnv) waitRemapped(t *testing.T, ns, name string, pod []string, external ...string) *netv1beta1.Configuration {
	t.Helper()
	return e.waitConf(t, ns, name, fmt.Sprintf("ready with pod %v external %v", pod, external), func(c *netv1beta1.Configuration) error {
		for _, ct := range []string{netv1beta1.ConditionReady, netv1beta1.ConditionNetworkCIDRsConfigured} {
			if err := condIs(c, ct, metav1.ConditionTrue, outcome.ReasonReconciled); err != nil {
				return err
			}
		}
		for _, ct := range []string{netv1beta1.ConditionReconciling, netv1beta1.ConditionStalled} {
			if cond := meta.FindStatusCondition(c.Status.Conditions, ct); cond != nil {
				return fmt.Errorf("%s condition present on a ready object: %+v", ct, cond)
			}
		}
		r := c.Status.Remote
		if r == nil {
			return fmt.Errorf("no status.remote")
		}
		if got := cidrStrings(r.CIDR.Pod); !slices.Equal(got, pod) {
			return fmt.Errorf("status.remote.cidr.pod %v, want %v", got, pod)
		}
		if got := cidrStrings(r.CIDR.External); !slices.Equal(got, external) {
			return fmt.Errorf("status.remote.cidr.external %v, want %v", got, external)
		}
		return nil
	})
}

// waitStalled waits until ns/name is Stalled for reason, with a message
// containing msg, and holds no ranges.
func (e *confEnv) waitStalled(t *testing.T, ns, name, reason, msg string) *netv1beta1.Configuration {
	t.Helper()
	return e.waitConf(t, ns, name, "stalled with reason "+reason, func(c *netv1beta1.Configuration) error {
		for _, ct := range []string{netv1beta1.ConditionStalled, netv1beta1.ConditionReady, netv1beta1.ConditionNetworkCIDRsConfigured} {
			want := metav1.ConditionFalse
			if ct == netv1beta1.ConditionStalled {
				want = metav1.ConditionTrue
			}
			if err := condIs(c, ct, want, reason); err != nil {
				return err
			}
		}
		if m := meta.FindStatusCondition(c.Status.Conditions, netv1beta1.ConditionStalled).Message; !strings.Contains(m, msg) {
			return fmt.Errorf("stalled message %q does not contain %q", m, msg)
		}
		if c.Status.Remote != nil {
			return fmt.Errorf("status.remote %+v on a stalled object", c.Status.Remote)
		}
		return nil
	})
}

// condIs checks one condition of c, for its current generation.
func condIs(c *netv1beta1.Configuration, condType string, s metav1.ConditionStatus, reason string) error {
	cond := meta.FindStatusCondition(c.Status.Conditions, condType)
	switch {
	case cond == nil:
		return fmt.Errorf("no %s condition in %+v", condType, c.Status.Conditions)
	case cond.Status != s || cond.Reason != reason:
		return fmt.Errorf("%s is %s/%s (%s), want %s/%s", condType, cond.Status, cond.Reason, cond.Message, s, reason)
	case cond.ObservedGeneration != c.Generation:
		return fmt.Errorf("%s describes generation %d, want %d", condType, cond.ObservedGeneration, c.Generation)
	}
	return nil
}

func cidrStrings(cs []netv1beta1.CIDR) []string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c))
	}
	return out
}

func (e *confEnv) delete(t *testing.T, ns, name string) {
	t.Helper()
	c := &netv1beta1.Configuration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := e.cluster.Client.Delete(t.Context(), c); err != nil {
		t.Fatalf("delete configuration %s/%s: %v", ns, name, err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, confWaitTimeout, true, func(ctx context.Context) (bool, error) {
		err := e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("configuration %s/%s still there after delete: %v", ns, name, err)
	}
}

// snapshot maps every Configuration to its resourceVersion and status.
func (e *confEnv) snapshot(t *testing.T) map[string]netv1beta1.Configuration {
	t.Helper()
	var list netv1beta1.ConfigurationList
	if err := e.cluster.Client.List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]netv1beta1.Configuration, len(list.Items))
	for _, c := range list.Items {
		out[c.Namespace+"/"+c.Name] = c
	}
	return out
}

// TestConfigurationReconciler runs the Configuration controller against a
// real API server through one story: the steps build on each other, since
// the ranges handed out depend on what earlier peers hold.
// newConfEnv starts a control plane with the CRDs and the namespaces given.
func newConfEnv(t *testing.T, namespaces ...string) *confEnv {
	t.Helper()
	e := &confEnv{cluster: ctrltest.StartCluster(t), facts: testFacts()}
	for _, ns := range namespaces {
		e.createNamespace(t, ns)
	}
	return e
}

// run starts the controller until the end of the test, whose log it shows
// when the test failed.
func (e *confEnv) run(t *testing.T) {
	t.Helper()
	e.startController(t)
	t.Cleanup(func() {
		e.stopController(t)
		if t.Failed() {
			t.Logf("controller log:\n%s", e.logs.Bytes())
		}
	})
}

func TestConfigurationReconciler(t *testing.T) {
	e := newConfEnv(t, "peerlink", "peers", "others")
	e.run(t)
	const ns = "peers"
	pod16 := []string{"10.244.0.0/16"}

	t.Run("cluster info", func(t *testing.T) {
		var cm corev1.ConfigMap
		err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, confWaitTimeout, true, func(ctx context.Context) (bool, error) {
			return e.cluster.Client.Get(ctx, types.NamespacedName{Namespace: "peerlink", Name: clusterinfo.Name}, &cm) == nil, nil
		})
		if err != nil {
			t.Fatalf("configmap %s not published: %v", clusterinfo.Name, err)
		}
		want := map[string]string{
			"clusterID": "local", "podCIDRs": "10.244.0.0/16", "serviceCIDR": "10.96.0.0/12",
			"externalCIDR": "10.70.0.0/16", "internalCIDR": "10.80.0.0/16",
			"allowedPeerCIDRs":  "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7",
			"routedPeerCIDRs":   "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10",
			"controllerVersion": "v0.3.0",
		}
		for k, v := range want {
			if cm.Data[k] != v {
				t.Errorf("configmap key %s = %q, want %q", k, cm.Data[k], v)
			}
		}
	})

	t.Run("default templates", func(t *testing.T) {
		defaults, err := templates.Defaults()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range defaults {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(want.GroupVersionKind())
			key := types.NamespacedName{Namespace: "peerlink", Name: want.GetName()}
			err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, confWaitTimeout, true, func(ctx context.Context) (bool, error) {
				return e.cluster.Client.Get(ctx, key, got) == nil, nil
			})
			if err != nil {
				t.Fatalf("%s %s not applied by the controller: %v", want.GetKind(), key, err)
			}
			if !reflect.DeepEqual(got.Object["spec"], want.Object["spec"]) {
				t.Errorf("%s %s: spec differs from the embedded default", want.GetKind(), key)
			}
		}
	})

	t.Run("same pod and external CIDRs as this cluster are remapped", func(t *testing.T) {
		e.create(t, newConf(ns, "peer-a", "peer-a", pod16, "10.70.0.0/16"))
		e.waitRemapped(t, ns, "peer-a", []string{"10.0.0.0/16"}, "10.1.0.0/16")
	})

	t.Run("free CIDRs are kept", func(t *testing.T) {
		e.create(t, newConf(ns, "peer-b", "peer-b", []string{"10.245.0.0/16"}, "10.71.0.0/16"))
		e.waitRemapped(t, ns, "peer-b", []string{"10.245.0.0/16"}, "10.71.0.0/16")
	})

	t.Run("three peers with the same CIDR get three ranges", func(t *testing.T) {
		for _, name := range []string{"peer-c", "peer-d", "peer-e"} {
			e.create(t, newConf(ns, name, name, pod16))
		}
		var got []string
		for _, name := range []string{"peer-c", "peer-d", "peer-e"} {
			c := e.waitConf(t, ns, name, "ready", func(c *netv1beta1.Configuration) error {
				return condIs(c, netv1beta1.ConditionReady, metav1.ConditionTrue, outcome.ReasonReconciled)
			})
			got = append(got, string(c.Status.Remote.CIDR.Pod[0]))
		}
		slices.Sort(got)
		if want := []string{"10.2.0.0/16", "10.3.0.0/16", "10.4.0.0/16"}; !slices.Equal(got, want) {
			t.Errorf("remapped pod CIDRs %v, want %v", got, want)
		}
	})

	t.Run("kubectl get conf shows desired and remapped pod CIDRs", func(t *testing.T) {
		out, stderr, err := e.cluster.Kubectl("get", "conf", "-n", ns, "peer-a")
		if err != nil {
			t.Fatalf("%v: %s", err, stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("kubectl get conf printed %q", out)
		}
		for _, h := range []string{"DESIRED POD CIDR", "REMAPPED POD CIDR"} {
			if !strings.Contains(lines[0], h) {
				t.Errorf("header %q lacks column %s", lines[0], h)
			}
		}
		desired := strings.Index(lines[0], "DESIRED POD CIDR")
		remapped := strings.Index(lines[0], "REMAPPED POD CIDR")
		if row := lines[1]; len(row) < remapped || !strings.Contains(row[desired:remapped], "10.244.0.0/16") ||
			!strings.Contains(row[remapped:], "10.0.0.0/16") {
			t.Errorf("row %q does not show 10.244.0.0/16 remapped to 10.0.0.0/16", row)
		}
	})

	t.Run("a reconcile that changes nothing writes nothing", func(t *testing.T) {
		c := e.get(t, ns, "peer-a")
		// A label change brings a reconcile but changes neither spec nor
		// status.
		c.Labels["team"] = "blue"
		if err := e.cluster.Client.Update(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		rv := c.ResourceVersion
		// The controller works through its queue in order: once a later
		// Configuration is Ready, peer-a was reconciled.
		e.create(t, newConf(ns, "marker-1", "marker-1", []string{"10.246.0.0/16"}))
		e.waitRemapped(t, ns, "marker-1", []string{"10.246.0.0/16"})
		if got := e.get(t, ns, "peer-a").ResourceVersion; got != rv {
			t.Errorf("resourceVersion of peer-a went from %s to %s", rv, got)
		}
	})

	t.Run("a new controller rebuilds the same ranges", func(t *testing.T) {
		before := e.snapshot(t)
		e.stopController(t)
		e.startController(t)
		// Were the ranges not rebuilt from status, this peer would get
		// 10.0.0.0/16, which peer-a holds.
		e.create(t, newConf(ns, "peer-f", "peer-f", pod16))
		e.waitRemapped(t, ns, "peer-f", []string{"10.5.0.0/16"})
		after := e.snapshot(t)
		for key, b := range before {
			a, ok := after[key]
			if !ok {
				t.Errorf("%s is gone", key)
				continue
			}
			if a.ResourceVersion != b.ResourceVersion {
				t.Errorf("%s: resourceVersion went from %s to %s: %+v", key, b.ResourceVersion, a.ResourceVersion, a.Status)
			}
		}
	})

	t.Run("a deleted peer's range goes to the next peer", func(t *testing.T) {
		d := e.get(t, ns, "peer-d")
		freed := string(d.Status.Remote.CIDR.Pod[0])
		e.delete(t, ns, "peer-d")
		e.create(t, newConf(ns, "peer-g", "peer-g", pod16))
		e.waitRemapped(t, ns, "peer-g", []string{freed})
	})

	t.Run("a replaced CIDR gets a new range and the others keep theirs", func(t *testing.T) {
		c := e.get(t, ns, "peer-a")
		c.Spec.Remote.CIDR.External = []netv1beta1.CIDR{"10.72.0.0/16"}
		if err := e.cluster.Client.Update(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		e.waitRemapped(t, ns, "peer-a", []string{"10.0.0.0/16"}, "10.72.0.0/16")
		// The range of the replaced CIDR is free again.
		e.create(t, newConf(ns, "peer-h", "peer-h", pod16))
		e.waitRemapped(t, ns, "peer-h", []string{"10.1.0.0/16"})
	})

	t.Run("bad input stalls and holds nothing", func(t *testing.T) {
		e.create(t, newConf(ns, "no-label", "", pod16))
		e.waitStalled(t, ns, "no-label", outcome.ReasonMissingRemoteClusterID, "metadata.labels[liqo.io/remote-cluster-id]")

		e.create(t, newConf(ns, "self", "local", pod16))
		e.waitStalled(t, ns, "self", outcome.ReasonOwnClusterID, `"local"`)

		e.create(t, newConf(ns, "host-bits", "host-bits", []string{"10.244.1.0/16"}))
		e.waitStalled(t, ns, "host-bits", configuration.ReasonInvalidCIDR, "spec.remote.cidr.pod[0]")

		e.create(t, newConf(ns, "overlap", "overlap", pod16, "10.70.0.0/16", "10.244.128.0/17"))
		e.waitStalled(t, ns, "overlap", configuration.ReasonOverlappingCIDRs, "spec.remote.cidr.external[1] 10.244.128.0/17 overlaps spec.remote.cidr.pod[0] 10.244.0.0/16")

		// A second Configuration of peer-b, newer, in another namespace.
		e.create(t, newConf("others", "peer-b", "peer-b", pod16))
		e.waitStalled(t, "others", "peer-b", configuration.ReasonDuplicateRemoteClusterID, "Configuration peers/peer-b already declares remote cluster peer-b")

		// None of them holds a range: the next peer gets the lowest free.
		e.create(t, newConf(ns, "peer-i", "peer-i", pod16))
		e.waitRemapped(t, ns, "peer-i", []string{"10.6.0.0/16"})
	})

	t.Run("a ready peer made invalid releases its ranges", func(t *testing.T) {
		c := e.get(t, ns, "peer-h")
		c.Spec.Remote.CIDR.External = []netv1beta1.CIDR{"10.244.0.0/24"}
		if err := e.cluster.Client.Update(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		e.waitStalled(t, ns, "peer-h", configuration.ReasonOverlappingCIDRs, "spec.remote.cidr.external[0]")
		e.create(t, newConf(ns, "peer-j", "peer-j", pod16))
		e.waitRemapped(t, ns, "peer-j", []string{"10.1.0.0/16"})
		// Fixed again, it gets a range again.
		c = e.get(t, ns, "peer-h")
		c.Spec.Remote.CIDR.External = nil
		if err := e.cluster.Client.Update(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		e.waitRemapped(t, ns, "peer-h", []string{"10.7.0.0/16"})
	})

	t.Run("the newer duplicate takes over when the older goes", func(t *testing.T) {
		e.delete(t, ns, "peer-b")
		e.waitRemapped(t, "others", "peer-b", []string{"10.8.0.0/16"})
		// peer-b's 10.245.0.0/16 is free again and kept by whoever asks.
		e.create(t, newConf(ns, "peer-k", "peer-k", []string{"10.245.0.0/16"}))
		e.waitRemapped(t, ns, "peer-k", []string{"10.245.0.0/16"})
	})
}

// TestConfigurationWithoutPlan: with no address plan for peers (the
// default), a peer's range is remapped into the pools whatever it collides
// with, including the private ranges a VPC or an office network may use
// behind the default route; inside a plan, a range is kept only when it
// holds no cloud service address; and a range a controller kept under an
// earlier plan is remapped once the plan no longer holds it.
func TestConfigurationWithoutPlan(t *testing.T) {
	e := newConfEnv(t, "peerlink", "peers")
	e.facts.RoutedPeer = cidr.MustPrefixes("100.64.0.0/10", "172.16.0.0/12")
	e.startController(t)
	t.Cleanup(func() {
		e.stopController(t)
		if t.Failed() {
			t.Logf("controller log:\n%s", e.logs.Bytes())
		}
	})
	const ns = "peers"

	// Under the plan: kept, unless it holds a cloud service address.
	e.create(t, newConf(ns, "planned", "planned", []string{"100.64.0.0/16"}))
	e.waitRemapped(t, ns, "planned", []string{"100.64.0.0/16"})
	e.create(t, newConf(ns, "resolver", "resolver", []string{"172.31.0.0/16"}, "100.100.0.0/16"))
	e.waitRemapped(t, ns, "resolver", []string{"10.0.0.0/16"}, "10.1.0.0/16")

	// The controller restarts with the default, empty plan.
	e.stopController(t)
	e.facts.RoutedPeer = nil
	e.startController(t)
	e.waitRemapped(t, ns, "planned", []string{"10.2.0.0/16"})
	e.waitRemapped(t, ns, "resolver", []string{"10.0.0.0/16"}, "10.1.0.0/16")
	for _, tc := range []struct {
		name string
		pod  string
		got  string
	}{
		{"vpc", "172.16.0.0/12", "10.16.0.0/12"},
		{"office", "192.168.0.0/16", "10.3.0.0/16"},
		{"cgnat", "100.64.0.0/10", "10.128.0.0/10"},
		{"aws-resolver", "172.31.0.0/30", "10.4.0.0/30"},
		{"free", "10.245.0.0/16", "10.5.0.0/16"},
	} {
		e.create(t, newConf(ns, tc.name, tc.name, []string{tc.pod}))
		c := e.waitRemapped(t, ns, tc.name, []string{tc.got})
		if msg := meta.FindStatusCondition(c.Status.Conditions, netv1beta1.ConditionReady).Message; !strings.Contains(msg, tc.pod+" remapped to "+tc.got) {
			t.Errorf("%s: Ready message %q does not say %s is remapped", tc.name, msg, tc.pod)
		}
	}
}
