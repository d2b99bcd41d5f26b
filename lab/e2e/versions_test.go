package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// oldestKubernetes is the oldest minor release of Kubernetes upstream still
// supports, pinned in hack/kube-1.35; the rest of the suite runs on the
// default release of hack/kube.
const oldestKubernetes = "1.35"

// TestSmokeOldestKubernetes runs the smoke set on two clusters of the oldest
// supported release: peerlink installed (kubectl apply -k), the two peered
// with network connect, pods reaching each other both ways, and a Service
// each exports called by its clusterset name from the other.
func TestSmokeOldestKubernetes(t *testing.T) {
	alone(t)
	ctx, l := newLabWith(t, 20*time.Minute, labctl.Options{Names: []string{"oldest-1", "oldest-2"}, KubernetesMinor: oldestKubernetes})
	a, b := l.Clusters[0], l.Clusters[1]
	for _, n := range l.Clusters {
		var v struct {
			ServerVersion struct{ GitVersion string } `json:"serverVersion"`
		}
		if err := json.Unmarshal([]byte(kubectlOut(t, ctx, l, n, "version", "-o", "json")), &v); err != nil {
			t.Fatalf("%s: kubectl version: %v", n.Name, err)
		}
		if !strings.HasPrefix(v.ServerVersion.GitVersion, "v"+oldestKubernetes+".") {
			t.Fatalf("%s runs Kubernetes %q, not %s", n.Name, v.ServerVersion.GitVersion, oldestKubernetes)
		}
		t.Logf("%s: Kubernetes %s", n.Name, v.ServerVersion.GitVersion)
	}
	if out, err := l.Connect(ctx, a, b); err != nil {
		t.Fatalf("connect %s to %s: %v\n%s", a.Name, b.Name, err, out)
	}
	waitConnected(t, ctx, l, a, b)
	podsA, podsB := echoPods(t, ctx, l, a), echoPods(t, ctx, l, b)
	checkTraffic(t, ctx, l, a, podsA[0], b, podsB[0])
	checkTraffic(t, ctx, l, b, podsB[1], a, podsA[1])
	exportEcho(t, ctx, l, a)
	exportEcho(t, ctx, l, b)
	callExportedEcho(t, ctx, l, a, podsA[0], b)
	callExportedEcho(t, ctx, l, b, podsB[0], a)
}
