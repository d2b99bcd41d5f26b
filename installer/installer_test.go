package installer

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/kbuild"
	"github.com/peerlink/peerlink/peering"
	"github.com/peerlink/peerlink/templates"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// factsData returns the data of the facts ConfigMap among objs.
func factsData(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), factsConfigMap+"-") {
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			return data
		}
	}
	t.Fatalf("no ConfigMap %s among %d objects", factsConfigMap, len(objs))
	return nil
}

// TestObjects builds the embedded bundle: without facts it is the
// repository's bundles/install as kustomize builds it; given facts land in
// the facts ConfigMap, and only they.
func TestObjects(t *testing.T) {
	plain, err := Objects(Facts{})
	if err != nil {
		t.Fatal(err)
	}
	repo, err := kbuild.Build("../bundles/install")
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != len(repo) {
		t.Fatalf("embedded bundle: %d objects, bundles/install: %d", len(plain), len(repo))
	}
	for i := range plain {
		if plain[i].GetKind() != repo[i].GetKind() || plain[i].GetName() != repo[i].GetName() {
			t.Errorf("object %d: %s %s, bundles/install has %s %s", i, plain[i].GetKind(), plain[i].GetName(), repo[i].GetKind(), repo[i].GetName())
		}
	}
	def := factsData(t, plain)
	if def["CLUSTER_ID"] != "" || def["POD_CIDRS"] != "" || def["SERVICE_CIDR"] != "" {
		t.Errorf("facts without flags: %v, want the cluster ID and ranges left to detection", def)
	}

	given, err := Objects(Facts{
		ClusterID:     "cluster-a",
		PodCIDRs:      cidr.MustPrefixes("10.244.0.0/16", "10.245.0.0/16"),
		ServiceCIDR:   netip.MustParsePrefix("10.96.0.0/12"),
		ReservedCIDRs: cidr.MustPrefixes("192.168.10.0/24"),
	})
	if err != nil {
		t.Fatal(err)
	}
	data := factsData(t, given)
	for k, v := range map[string]string{
		"CLUSTER_ID": "cluster-a", "POD_CIDRS": "10.244.0.0/16,10.245.0.0/16",
		"SERVICE_CIDR": "10.96.0.0/12", "RESERVED_CIDRS": "192.168.10.0/24",
	} {
		if data[k] != v {
			t.Errorf("facts %s = %q, want %q", k, data[k], v)
		}
	}
	for k, v := range def {
		if _, set := map[string]bool{"CLUSTER_ID": true, "POD_CIDRS": true, "SERVICE_CIDR": true, "RESERVED_CIDRS": true}[k]; !set && data[k] != v {
			t.Errorf("facts %s = %q changed from the default %q", k, data[k], v)
		}
	}

	for _, bad := range []struct {
		f    Facts
		want string
	}{
		{Facts{ClusterID: "Not_A_Label"}, "--cluster-id"},
		{Facts{PodCIDRs: cidr.MustPrefixes("10.96.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/12")}, "--pod-cidr 10.96.0.0/16 overlaps --service-cidr 10.96.0.0/12"},
	} {
		if _, err := Objects(bad.f); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Objects(%+v): %v, want an error with %q", bad.f, err, bad.want)
		}
	}
}

// cliClient starts a test cluster and returns it with the CLI's own
// client of it, whose scheme lacks the apiextensions kinds, and the
// bundle's objects for facts.
func cliClient(t *testing.T, facts Facts) (*testcluster.Cluster, client.Client, []*unstructured.Unstructured) {
	t.Helper()
	c := testcluster.Start(t)
	cli, err := peering.NewClient(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(facts)
	if err != nil {
		t.Fatal(err)
	}
	return c, cli, objs
}

// TestApply applies the bundle to a real API server in one run, CRDs and
// the objects of their kinds' API group alike; a second run changes
// nothing, and a field another manager owns is reported, not taken.
func TestApply(t *testing.T) {
	c, cli, objs := cliClient(t, Facts{ClusterID: "cluster-a"})
	ctx := t.Context()
	var out bytes.Buffer
	p := peering.Progress{Out: &out, Timeout: time.Minute}
	if err := Apply(ctx, cli, objs, p); err != nil {
		t.Fatalf("first apply: %v\n%s", err, out.String())
	}
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, got); err != nil {
			t.Errorf("%s %s/%s not applied: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	if !strings.Contains(out.String(), "CustomResourceDefinitions applied") {
		t.Errorf("no progress line for the CRDs:\n%s", out.String())
	}
	if err := Apply(ctx, cli, objs, p); err != nil {
		t.Fatalf("second apply: %v", err)
	}

	// Someone else takes a field the install sets.
	var sa corev1.ServiceAccount
	key := types.NamespacedName{Namespace: Namespace, Name: "peerlink-controller"}
	if err := c.Client.Get(ctx, key, &sa); err != nil {
		t.Fatal(err)
	}
	sa.Labels["app.kubernetes.io/part-of"] = "someone-else"
	sa.ManagedFields = nil
	if err := c.Client.Update(ctx, &sa, client.FieldOwner("other-tool")); err != nil {
		t.Fatal(err)
	}
	err := Apply(ctx, cli, objs, p)
	if err == nil || !strings.Contains(err.Error(), "ServiceAccount peerlink/peerlink-controller") || !strings.Contains(err.Error(), "another manager") {
		t.Errorf("apply over another manager's field: %v, want a conflict naming the object", err)
	}
}

// TestWaitReadyReportsControllerStops: a controller that keeps stopping
// while the install waits (here, as one that cannot detect the pod CIDRs
// would) makes WaitReady fail at once with the reason the controller left
// in its termination message. One that stopped once, or whose stops all
// came before the wait (an install run again after the cause was fixed),
// is waited for.
func TestWaitReadyReportsControllerStops(t *testing.T) {
	c, cli, objs := cliClient(t, Facts{})
	ctx := t.Context()
	if err := Apply(ctx, cli, objs, peering.Progress{Out: &bytes.Buffer{}, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	const why = "PodCIDRs: not given: pod CIDRs: none of the 2 nodes has spec.podCIDRs (--pod-cidr)"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "peerlink-controller-1", Labels: map[string]string{"app.kubernetes.io/name": templates.ControllerDeployment}},
		Spec: corev1.PodSpec{ServiceAccountName: "peerlink-controller", AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "controller", Image: "peerlink-agent"}}},
	}
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// stopped gives the controller's container restarts stops, the last
	// one with the message why, and puts it in CrashLoopBackOff.
	stopped := func(restarts int32) {
		t.Helper()
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "controller", Image: "peerlink-agent", RestartCount: restarts,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: why}},
		}}
		if err := c.Client.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	// wait runs WaitReady for timeout, calling during once it has begun.
	wait := func(timeout time.Duration, during func()) error {
		done := make(chan error, 1)
		go func() {
			_, err := WaitReady(ctx, cli, peering.Progress{Out: &bytes.Buffer{}, Timeout: timeout, TimeoutName: "--timeout"})
			done <- err
		}()
		time.Sleep(time.Second)
		during()
		return <-done
	}

	for _, tc := range []struct {
		name          string
		before, after int32
	}{{"stopped once during the wait", 0, 1}, {"every stop before the wait", 3, 3}} {
		stopped(tc.before)
		if err := wait(3*time.Second, func() { stopped(tc.after) }); err == nil || strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want the wait to run out", tc.name, err)
		}
	}

	stopped(0)
	start := time.Now()
	err := wait(time.Minute, func() { stopped(crashLoopRestarts) })
	if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), pod.Name) {
		t.Fatalf("a controller that keeps stopping during the wait: %v, want its termination message and pod", err)
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("the stops were reported after %s, want at once", time.Since(start))
	}
	t.Log(err)
}
