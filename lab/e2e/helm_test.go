package e2e

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestHelmInstall installs peerlink with helm install of the chart in one
// cluster and with kubectl apply -k in the other, peers them with peerlink
// network connect, and checks traffic both ways; then a helm upgrade that
// changes a fact rolls the controller out and the peering carries on.
func TestHelmInstall(t *testing.T) {
	ctx, l := newPeeredLabWith(t, 15*time.Minute, labctl.Options{
		IDs:        []string{"helm-a", "helm-b"},
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
		t.Fatalf("release peerlink of %s is %q, want deployed", a.ClusterID, status.Info.Status)
	}
	// The controller of a is the release's, the one of b is not: each
	// cluster was installed its own way.
	for _, c := range []struct {
		n       *cluster.Cluster
		release string
	}{{a, "peerlink"}, {b, ""}} {
		d := controller(t, l, c.n)
		if got := d.Annotations["meta.helm.sh/release-name"]; got != c.release {
			t.Errorf("%s: the controller Deployment belongs to Helm release %q, want %q", c.n.ClusterID, got, c.release)
		}
		if d.Status.ReadyReplicas != 1 {
			t.Errorf("%s: %d ready controller replicas, want 1", c.n.ClusterID, d.Status.ReadyReplicas)
		}
	}
	// The values reached the controller, which published them.
	ca, err := l.Client(a)
	if err != nil {
		t.Fatal(err)
	}
	info, err := clusterinfo.Read(ctx, ca, labctl.PeerlinkNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if info.ClusterID != a.ClusterID {
		t.Errorf("%s publishes cluster ID %q, want %q", a.ClusterID, info.ClusterID, a.ClusterID)
	}
	podsA, podsB := checkPeered(t, ctx, l, a, b)

	// A fact changed by helm upgrade renames the facts ConfigMap, so the
	// controller rolls out with it.
	before := factsName(t, controller(t, l, a))
	chart := filepath.Join(l.State.Repo, "bundles", "helm", "peerlink")
	if _, err := l.Helm(ctx, a, "upgrade", "peerlink", chart, "--namespace", labctl.PeerlinkNamespace, "--reuse-values",
		"--set", `facts.RESERVED_CIDRS=`+cluster.NodeNetwork+`\,192.168.250.0/24`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Kubectl(ctx, a, "-n", labctl.PeerlinkNamespace, "rollout", "status", "deployment/peerlink-controller", "--timeout=3m"); err != nil {
		t.Fatal(err)
	}
	if after := factsName(t, controller(t, l, a)); after == before {
		t.Errorf("%s: the controller still reads %s after the upgrade changed a fact", a.ClusterID, before)
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
		t.Fatalf("%s: %v", n.ClusterID, err)
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
