package e2e

import (
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/bundles/helmchart"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestHelmInstall installs peerlink with helm install of the chart in one
// cluster and with kubectl apply -k in the other, peers them with peerlink
// network connect, and checks traffic both ways; then a helm upgrade that
// sets a fact and two controller replicas rolls the controller out (the
// checksum of the facts ConfigMap on its pod template changes) and the
// peering carries on.
func TestHelmInstall(t *testing.T) {
	sideBySide(t)
	ctx, l := newPeeredLabWith(t, 15*time.Minute, labctl.Options{
		Names:      []string{"helm-a", "helm-b"},
		Installers: []labctl.Installer{labctl.Helm, labctl.Kustomize},
	})
	a, b := l.Clusters[0], l.Clusters[1]

	out, err := l.Helm(ctx, a, "status", "peerlink", "--namespace", labctl.PeerlinkNamespace, "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var status struct {
		Info struct{ Status string }
	}
	if err := json.Unmarshal(out, &status); err != nil {
		t.Fatalf("helm status: %v\n%s", err, out)
	}
	if status.Info.Status != "deployed" {
		t.Fatalf("release peerlink of %s is %q, want deployed", a.Name, status.Info.Status)
	}
	// The controller of a is the release's, the one of b is not: each
	// cluster was installed its own way.
	for _, c := range []struct {
		n       *cluster.Cluster
		release string
	}{{a, "peerlink"}, {b, ""}} {
		d := controller(t, l, c.n)
		if got := d.Annotations["meta.helm.sh/release-name"]; got != c.release {
			t.Errorf("%s: the controller Deployment belongs to Helm release %q, want %q", c.n.Name, got, c.release)
		}
		if d.Status.ReadyReplicas != 1 {
			t.Errorf("%s: %d ready controller replicas, want 1", c.n.Name, d.Status.ReadyReplicas)
		}
	}
	podsA, podsB := checkPeered(t, ctx, l, a, b)

	// A fact set by helm upgrade changes the checksum of the facts
	// ConfigMap on the controller's pod template, so the controller rolls
	// out with it, now with two replicas.
	const reserved = "192.168.250.0/24"
	before := controller(t, l, a)
	if _, err := l.Helm(ctx, a, "upgrade", "peerlink", l.Chart(), "--namespace", labctl.PeerlinkNamespace, "--reuse-values",
		"--set", "facts.RESERVED_CIDRS="+reserved, "--set", "controller.replicas=2"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Kubectl(ctx, a, "-n", labctl.PeerlinkNamespace, "rollout", "status", "deployment/peerlink-controller", "--timeout=3m"); err != nil {
		t.Fatal(err)
	}
	d := controller(t, l, a)
	facts := factsName(t, d)
	if was := factsName(t, before); facts != was {
		t.Errorf("%s: the controller reads %s after the upgrade, %s before: the chart's name of the facts ConfigMap is stable", a.Name, facts, was)
	}
	if sum, was := d.Spec.Template.Annotations[helmchart.ChecksumAnnotation], before.Spec.Template.Annotations[helmchart.ChecksumAnnotation]; sum == "" || sum == was {
		t.Errorf("%s: the controller's pod template has checksum %q after the upgrade changed a fact, %q before", a.Name, sum, was)
	}
	if d.Status.ReadyReplicas != 2 {
		t.Errorf("%s: %d ready controller replicas after the upgrade, want 2", a.Name, d.Status.ReadyReplicas)
	}
	ca, err := l.Client(a)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := ca.Get(ctx, client.ObjectKey{Namespace: labctl.PeerlinkNamespace, Name: facts}, cm); err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["RESERVED_CIDRS"]; got != reserved {
		t.Errorf("%s: %s holds RESERVED_CIDRS %q, want %q", a.Name, facts, got, reserved)
	}
	checkTraffic(t, ctx, l, a, podsA[0], b, podsB[1])
	checkTraffic(t, ctx, l, b, podsB[0], a, podsA[1])
}

// controller returns the controller Deployment of cluster n.
func controller(t *testing.T, l *labctl.Lab, n *cluster.Cluster) *appsv1.Deployment {
	t.Helper()
	c, err := l.Client(n)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: labctl.PeerlinkNamespace, Name: "peerlink-controller"}, d); err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	return d
}

// factsName is the ConfigMap the controller's container takes its
// environment from.
func factsName(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, from := range c.EnvFrom {
			if from.ConfigMapRef != nil {
				return from.ConfigMapRef.Name
			}
		}
	}
	t.Fatal("the controller reads no ConfigMap")
	return ""
}
