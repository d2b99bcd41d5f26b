package peering_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peering"
	"github.com/peerlink/peerlink/templates"
	"github.com/peerlink/peerlink/testkit/peertest"
)

// TestDiagnose peers two test clusters and breaks one thing after another:
// diagnose passes every check of the healthy peering, and for each break
// fails the check that names it, with what to do, and only that one.
func TestDiagnose(t *testing.T) {
	var out bytes.Buffer
	a, b, local, remote := pair(t, &out)
	ctx := t.Context()
	if err := peering.Connect(ctx, local, remote, connectOptions); err != nil {
		t.Fatalf("connect: %v\n%s", err, out.String())
	}
	// What the install bundle runs: the controller (its pods made ready
	// by the test cluster's kubelet) and the fabric agent of the one node.
	for _, c := range []*peertest.Cluster{a, b} {
		runWorkloads(t, c)
	}
	nsA := manifests.TenantNamespace("cluster-b")
	conn := &netv1beta1.Connection{}
	a.MustGet(t, nsA, manifests.GatewayObjectName("cluster-b"), conn)
	var keyOnB netv1beta1.PublicKey
	b.MustGet(t, manifests.TenantNamespace("cluster-a"), "cluster-a", &keyOnB)
	setStatus := func(change func(*netv1beta1.ConnectionStatus)) {
		t.Helper()
		a.MustGet(t, nsA, conn.Name, conn)
		change(&conn.Status)
		if err := a.C.Status().Update(ctx, conn); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(func(s *netv1beta1.ConnectionStatus) {
		s.PathMTU, s.PublicKey = netv1beta1.DefaultMTU, keyOnB.Spec.PublicKey
	})

	diagnose := func() *peering.Diagnosis {
		t.Helper()
		peertest.Eventually(t, "the controller available", func(ctx context.Context) error {
			d, err := peering.Diagnose(ctx, local, remote, templates.InstallNamespace)
			if err != nil {
				return err
			}
			for _, f := range d.Findings {
				if f.Check == "controller" && !f.OK {
					return errorString(f.Message)
				}
			}
			return nil
		})
		d, err := peering.Diagnose(ctx, local, remote, templates.InstallNamespace)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	healthy := diagnose()
	var summary bytes.Buffer
	healthy.WriteSummary(&summary)
	t.Logf("healthy:\n%s", summary.String())
	if healthy.Failed() != 0 {
		t.Fatalf("the healthy peering fails %d checks:\n%s", healthy.Failed(), summary.String())
	}
	for _, check := range []string{"controller", "fabric", "configuration", "gateway", "public key", "tunnel", "mtu", "key agreement", "clocks"} {
		if !hasFinding(healthy, check, true, "") {
			t.Errorf("the healthy peering has no %q check", check)
		}
	}

	for _, tc := range []struct {
		name, check, want string
		breakIt, repair   func()
	}{
		// The tunnel down: the peer's gateway runs (the test kubelet made
		// its pod ready), so the UDP path between the clusters is cut; or
		// it does not.
		{"a blocked UDP port", "tunnel", "the UDP path between the two clusters is blocked",
			func() { setStatus(func(s *netv1beta1.ConnectionStatus) { s.Value = netv1beta1.Connecting }) },
			func() { setStatus(func(s *netv1beta1.ConnectionStatus) { s.Value = netv1beta1.Connected }) }},
		{"the peer's gateway stopped", "tunnel", "the peer's gateway is stopped",
			func() {
				setGatewayReady(t, b, "cluster-a", false)
				setStatus(func(s *netv1beta1.ConnectionStatus) { s.Value = netv1beta1.Connecting })
			},
			func() {
				setGatewayReady(t, b, "cluster-a", true)
				setStatus(func(s *netv1beta1.ConnectionStatus) { s.Value = netv1beta1.Connected })
			}},
		{"an MTU mismatch", "mtu", "same MTU",
			func() {
				setStatus(func(s *netv1beta1.ConnectionStatus) {
					s.Conditions = append(s.Conditions, metav1.Condition{Type: netv1beta1.ConditionMTUMismatch, Status: metav1.ConditionTrue,
						Reason: "PeerAnnouncesOther", Message: "the peer's gateway announces 1400", LastTransitionTime: metav1.Now()})
				})
			},
			func() { setStatus(func(s *netv1beta1.ConnectionStatus) { s.Conditions = nil }) }},
		{"a path that carries less", "mtu", "lower the MTU",
			func() { setStatus(func(s *netv1beta1.ConnectionStatus) { s.PathMTU = 1200 }) },
			func() { setStatus(func(s *netv1beta1.ConnectionStatus) { s.PathMTU = netv1beta1.DefaultMTU }) }},
		{"a key the peer does not hold", "key agreement", "hand it over",
			func() { setStatus(func(s *netv1beta1.ConnectionStatus) { s.PublicKey = bytes.Repeat([]byte{7}, 32) }) },
			func() { setStatus(func(s *netv1beta1.ConnectionStatus) { s.PublicKey = keyOnB.Spec.PublicKey }) }},
		{"no fabric agent", "fabric", "node-cluster-a",
			func() { deleteFabric(t, a) },
			func() { runWorkloads(t, a) }},
	} {
		tc.breakIt()
		d := diagnose()
		var b bytes.Buffer
		d.WriteSummary(&b)
		if d.Failed() != 1 || !hasFinding(d, tc.check, false, tc.want) {
			t.Errorf("%s: want the %q check alone to fail, saying %q:\n%s", tc.name, tc.check, tc.want, b.String())
		}
		tc.repair()
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func hasFinding(d *peering.Diagnosis, check string, ok bool, says string) bool {
	for _, f := range d.Findings {
		if f.Check == check && f.OK == ok && strings.Contains(f.Message, says) {
			return true
		}
	}
	return false
}

// runWorkloads creates what the install bundle runs, as far as diagnose
// reads it: the controller Deployment and a fabric agent pod on the node.
func runWorkloads(t *testing.T, c *peertest.Cluster) {
	t.Helper()
	labels := func(name string) map[string]string { return map[string]string{"app.kubernetes.io/name": name} }
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "peerlink-agent"}}, AutomountServiceAccountToken: new(false)}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: templates.InstallNamespace, Name: templates.ControllerDeployment},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels(templates.ControllerDeployment)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(templates.ControllerDeployment)}, Spec: spec},
		},
	}
	fabric := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: templates.InstallNamespace, Name: "peerlink-fabric-1", Labels: labels(templates.FabricDaemonSet)}, Spec: spec}
	fabric.Spec.NodeName = "node-" + c.ID
	for _, obj := range []client.Object{dep, fabric} {
		if err := c.C.Create(t.Context(), obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	peertest.Eventually(t, "the fabric agent of "+c.ID+" ready", func(ctx context.Context) error {
		var p corev1.Pod
		if err := c.C.Get(ctx, client.ObjectKeyFromObject(fabric), &p); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return errorString("phase " + string(p.Status.Phase))
		}
		return nil
	})
}

// setGatewayReady sets the Ready condition of the gateway pods of cluster
// c for peer, as a kubelet does when they stop or start answering.
func setGatewayReady(t *testing.T, c *peertest.Cluster, peer string, ready bool) {
	t.Helper()
	var pods corev1.PodList
	if err := c.C.List(t.Context(), &pods, client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: peer}, client.HasLabels{netv1beta1.GatewayNameLabel}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("cluster %s has no gateway pod for %s", c.ID, peer)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		for j := range p.Status.Conditions {
			if p.Status.Conditions[j].Type == corev1.PodReady {
				p.Status.Conditions[j].Status = status
			}
		}
		if err := c.C.Status().Update(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
}

func deleteFabric(t *testing.T, c *peertest.Cluster) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: templates.InstallNamespace, Name: "peerlink-fabric-1"}}
	if err := c.C.Delete(t.Context(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	peertest.Eventually(t, "the fabric agent of "+c.ID+" gone", func(ctx context.Context) error {
		return c.Absent(ctx, pod.Namespace, pod.Name, &corev1.Pod{})
	})
}
