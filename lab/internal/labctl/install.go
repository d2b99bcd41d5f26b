package labctl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/lab/internal/cluster"
)

// PeerlinkNamespace is where the install bundle puts peerlink.
const PeerlinkNamespace = "peerlink"

// Kubectl runs the lab's kubectl against a cluster and returns its
// standard output.
func (l *Lab) Kubectl(ctx context.Context, n *cluster.Cluster, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, l.KubectlBin, append([]string{"--kubeconfig=" + n.Kubeconfig()}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("cluster %s: kubectl %s: %w: %s", n.ClusterID, strings.Join(args, " "),
			err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// install puts peerlink and the echo server into a fresh cluster.
func (l *Lab) install(ctx context.Context, n *cluster.Cluster) error {
	echo, err := l.writeEcho(n)
	if err != nil {
		return err
	}
	if _, err := l.Kubectl(ctx, n, "apply", "-f", echo); err != nil {
		return err
	}
	overlay, err := l.writeOverlay(n)
	if err != nil {
		return err
	}
	// Custom resources of the bundle can only be applied once the API
	// server serves their CRDs, which the same apply creates: a user runs
	// it again, and so does the lab.
	var last error
	for attempt := 0; attempt < 10; attempt++ {
		if _, last = l.Kubectl(ctx, n, "apply", "-k", overlay); last == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if last != nil {
		return last
	}
	// Ready means the controller and the fabric agent run: a peering
	// applied from now on is acted upon at once.
	for _, workload := range []string{"deployment/peerlink-controller", "daemonset/peerlink-fabric"} {
		if _, err := l.Kubectl(ctx, n, "-n", PeerlinkNamespace, "rollout", "status", workload, "--timeout=3m"); err != nil {
			return err
		}
	}
	l.progress.Logf("%s: peerlink installed and running (kubectl apply -k %s)", n.ClusterID, overlay)
	if _, err := l.Kubectl(ctx, n, "-n", EchoNamespace, "rollout", "status", "deployment/"+EchoDeployment, "--timeout=3m"); err != nil {
		return err
	}
	l.progress.Logf("%s: %d echo pods ready", n.ClusterID, EchoReplicas)
	return nil
}

// writeOverlay writes the kustomize overlay the lab installs peerlink with:
// the repository's install bundle as its base, by a relative path because
// kustomize accepts no other.
func (l *Lab) writeOverlay(n *cluster.Cluster) (string, error) {
	dir := filepath.Join(n.Dir, "peerlink")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cluster %s overlay: %w", n.ClusterID, err)
	}
	base, err := filepath.Rel(dir, filepath.Join(l.State.Repo, "bundles", "install"))
	if err != nil {
		return "", fmt.Errorf("cluster %s overlay: %w", n.ClusterID, err)
	}
	// The local facts, as docs/install.md tells users to set them. The
	// node network holds the node addresses and the lab registry: no peer
	// range may be remapped onto it.
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{base},
		"configMapGenerator": []any{map[string]any{
			"name":      "peerlink-facts",
			"namespace": PeerlinkNamespace,
			"behavior":  "merge",
			"literals": []string{
				"CLUSTER_ID=" + n.ClusterID,
				"POD_CIDRS=" + n.PodCIDR.String(),
				"SERVICE_CIDR=" + n.ServiceCIDR.String(),
				"RESERVED_CIDRS=" + cluster.NodeNetwork,
			},
		}},
	}
	b, err := yaml.Marshal(k)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), b, 0o644); err != nil {
		return "", fmt.Errorf("cluster %s overlay: %w", n.ClusterID, err)
	}
	return dir, nil
}
