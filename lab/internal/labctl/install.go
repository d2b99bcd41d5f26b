package labctl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/internal/testenv"
	"github.com/peerlink/peerlink/lab/internal/cluster"
)

// PeerlinkNamespace is where the install bundle puts peerlink.
const PeerlinkNamespace = "peerlink"

// Installer is how the lab installs peerlink in a cluster.
type Installer string

const (
	// Kustomize applies an overlay of bundles/install that sets the
	// cluster's facts, with kubectl apply -k.
	Kustomize Installer = "kustomize"
	// Helm installs the chart bundles/helm/peerlink with helm install, the
	// cluster's facts given as values.
	Helm Installer = "helm"
)

// ParseInstaller accepts the names of the installers.
func ParseInstaller(s string) (Installer, error) {
	switch i := Installer(s); i {
	case Kustomize, Helm:
		return i, nil
	}
	return "", fmt.Errorf("unknown installer %q: kustomize or helm", s)
}

// Kubectl runs the lab's kubectl against a cluster and returns its
// standard output.
func (l *Lab) Kubectl(ctx context.Context, n *cluster.Cluster, args ...string) ([]byte, error) {
	return run(ctx, n, l.KubectlBin, nil, args...)
}

// Helm runs the Helm CLI hack/components.sh builds against a cluster, with
// its configuration and cache in the cluster's directory, and returns its
// standard output.
func (l *Lab) Helm(ctx context.Context, n *cluster.Cluster, args ...string) ([]byte, error) {
	bin, err := testenv.Helm(l.State.Repo)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", n.ClusterID, err)
	}
	home := filepath.Join(n.Dir, "helm")
	return run(ctx, n, bin, []string{"HELM_CONFIG_HOME=" + home, "HELM_CACHE_HOME=" + home, "HELM_DATA_HOME=" + home}, args...)
}

// run runs the client bin against cluster n, with env added to the
// environment, and returns its standard output, or an error with its
// standard error.
func run(ctx context.Context, n *cluster.Cluster, bin string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig=" + n.Kubeconfig()}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("cluster %s: %s %s: %w: %s", n.ClusterID, filepath.Base(bin), strings.Join(args, " "),
			err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// install puts peerlink, the way how says, and the echo server into a
// fresh cluster.
func (l *Lab) install(ctx context.Context, n *cluster.Cluster, how Installer) error {
	echo, err := l.writeEcho(n)
	if err != nil {
		return err
	}
	if _, err := l.Kubectl(ctx, n, "apply", "-f", echo); err != nil {
		return err
	}
	var done string
	if how == Helm {
		done, err = l.installChart(ctx, n)
	} else {
		done, err = l.applyOverlay(ctx, n)
	}
	if err != nil {
		return err
	}
	// Ready means the controller and the fabric agent run: a peering
	// applied from now on is acted upon at once.
	for _, workload := range []string{"deployment/peerlink-controller", "daemonset/peerlink-fabric"} {
		if _, err := l.Kubectl(ctx, n, "-n", PeerlinkNamespace, "rollout", "status", workload, "--timeout=3m"); err != nil {
			return err
		}
	}
	l.progress.Logf("%s: peerlink installed and running (%s)", n.ClusterID, done)
	if _, err := l.Kubectl(ctx, n, "-n", EchoNamespace, "rollout", "status", "deployment/"+EchoDeployment, "--timeout=3m"); err != nil {
		return err
	}
	l.progress.Logf("%s: %d echo pods ready", n.ClusterID, EchoReplicas)
	return nil
}

// facts are the local facts of cluster n, as docs/install.md tells users to
// set them. The node network holds the node addresses and the lab
// registry: no peer range may be remapped onto it.
func facts(n *cluster.Cluster) map[string]string {
	return map[string]string{
		"CLUSTER_ID":     n.ClusterID,
		"POD_CIDRS":      n.PodCIDR.String(),
		"SERVICE_CIDR":   n.ServiceCIDR.String(),
		"RESERVED_CIDRS": cluster.NodeNetwork,
	}
}

// installChart installs the Helm chart as docs/install.md says: the
// bundle's own Namespace first, for the Pod Security level the lab's
// clusters do not give a namespace by default, then helm install with the
// facts in a values file. It says what it ran.
func (l *Lab) installChart(ctx context.Context, n *cluster.Cluster) (string, error) {
	dir := filepath.Join(n.Dir, "peerlink")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cluster %s values: %w", n.ClusterID, err)
	}
	b, err := yaml.Marshal(map[string]any{"facts": facts(n)})
	if err != nil {
		return "", err
	}
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, b, 0o644); err != nil {
		return "", fmt.Errorf("cluster %s values: %w", n.ClusterID, err)
	}
	if _, err := l.Kubectl(ctx, n, "apply", "-f", filepath.Join(l.State.Repo, "bundles", "install", "namespace.yaml")); err != nil {
		return "", err
	}
	chart := filepath.Join(l.State.Repo, "bundles", "helm", "peerlink")
	if _, err := l.Helm(ctx, n, "install", "peerlink", chart, "--namespace", PeerlinkNamespace, "--values", values); err != nil {
		return "", err
	}
	return "helm install -f " + values, nil
}

// applyOverlay applies the kustomize overlay of writeOverlay and says what
// it ran.
func (l *Lab) applyOverlay(ctx context.Context, n *cluster.Cluster) (string, error) {
	overlay, err := l.writeOverlay(n)
	if err != nil {
		return "", err
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
			return "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if last != nil {
		return "", last
	}
	return "kubectl apply -k " + overlay, nil
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
	var literals []string
	for key, value := range facts(n) {
		literals = append(literals, key+"="+value)
	}
	slices.Sort(literals)
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{base},
		"configMapGenerator": []any{map[string]any{
			"name":      "peerlink-facts",
			"namespace": PeerlinkNamespace,
			"behavior":  "merge",
			"literals":  literals,
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
