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

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/choice"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/testkit/testenv"
)

// PeerlinkNamespace is where the install bundle puts peerlink.
const PeerlinkNamespace = "peerlink"

// ControllerSelector selects the pods of peerlink's controller, in
// PeerlinkNamespace.
const ControllerSelector = "app.kubernetes.io/name=peerlink-controller"

// Installer is how the lab installs peerlink in a cluster.
type Installer string

const (
	// Kustomize applies the install bundle with kubectl apply -k.
	Kustomize Installer = "kustomize"
	// Helm installs the chart bundles/helm/peerlink with helm install.
	Helm Installer = "helm"
)

// ParseInstaller accepts the names of the installers.
func ParseInstaller(s string) (Installer, error) {
	return choice.Parse("installer", s, Kustomize, Helm)
}

// waitRollout waits, three minutes at most each, until the rollout of
// every workload (kind/name) of namespace ns in n is complete.
func (l *Lab) waitRollout(ctx context.Context, n *cluster.Cluster, ns string, workloads ...string) error {
	for _, w := range workloads {
		if _, err := l.Kubectl(ctx, n, "-n", ns, "rollout", "status", w, "--timeout=3m"); err != nil {
			return err
		}
	}
	return nil
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
		return nil, fmt.Errorf("cluster %s: %w", n.Name, err)
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
		return out, fmt.Errorf("cluster %s: %s %s: %w: %s", n.Name, filepath.Base(bin), strings.Join(args, " "),
			err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// install puts peerlink and the echo server into a fresh cluster: peerlink
// as a user does, the way how says, with no facts, all of which the
// controller detects; the cluster ID it detected becomes the cluster's.
func (l *Lab) install(ctx context.Context, n *cluster.Cluster, how Installer) error {
	echo, err := l.writeEcho(n)
	if err != nil {
		return err
	}
	if _, err := l.Kubectl(ctx, n, "apply", "-f", echo); err != nil {
		return err
	}
	if !l.skipInstall {
		if err := l.installPeerlink(ctx, n, how); err != nil {
			return err
		}
		// An explicit variable wins over the facts ConfigMap's; one
		// change, so one rollout.
		var env []string
		if l.importAll {
			env = append(env, "IMPORT_NAMESPACES=*")
		}
		if len(l.routedPeer) > 0 {
			env = append(env, "ROUTED_PEER_CIDRS="+rangepolicy.Format(l.routedPeer))
		}
		if len(env) > 0 {
			args := append([]string{"-n", PeerlinkNamespace, "set", "env", "deployment/peerlink-controller"}, env...)
			if _, err := l.Kubectl(ctx, n, args...); err != nil {
				return err
			}
		}
		if err := l.WaitInstalled(ctx, n); err != nil {
			return err
		}
	}
	if err := l.waitRollout(ctx, n, EchoNamespace, "deployment/"+EchoDeployment); err != nil {
		return err
	}
	l.progress.Logf("%s: %d echo pods ready", n.Name, EchoReplicas)
	return nil
}

// WaitInstalled waits until peerlink runs in n, its controller and its
// fabric agent, so that a peering applied from now on is acted upon at
// once, and takes the cluster ID the controller published as n's.
func (l *Lab) WaitInstalled(ctx context.Context, n *cluster.Cluster) error {
	if err := l.waitRollout(ctx, n, PeerlinkNamespace, "deployment/peerlink-controller", "daemonset/peerlink-fabric"); err != nil {
		return err
	}
	c, err := l.Client(n)
	if err != nil {
		return err
	}
	var info clusterinfo.Info
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		info, err = clusterinfo.Read(ctx, c, PeerlinkNamespace)
		// The lab's address plan is in force once the controller that
		// leads publishes it: a controller started before it was set may
		// still lead for a moment after the rollout, and would remap the
		// ranges of a peering made meanwhile for good.
		return err == nil && slices.Equal(info.RoutedPeer, l.routedPeer), nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: peerlink's cluster info: %w", n.Name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n.ClusterID = info.ClusterID
	for i := range l.State.Clusters {
		if l.State.Clusters[i].Index == n.Index {
			l.State.Clusters[i] = recordOf(n)
		}
	}
	if err := writeState(l.Dir, l.State); err != nil {
		return err
	}
	l.progress.Logf("%s: peerlink running, cluster ID %s (%s), pods %s (%s), services %s (%s)", n.Name,
		info.ClusterID, info.Sources[clusterinfo.KeyClusterID], rangepolicy.Format(info.PodCIDRs), info.Sources[clusterinfo.KeyPodCIDRs],
		info.ServiceCIDR, info.Sources[clusterinfo.KeyServiceCIDR])
	return nil
}

// InstallBundle is the repository's install bundle, which the lab applies
// as it is.
func (l *Lab) InstallBundle() string { return filepath.Join(l.State.Repo, "bundles", "install") }

// Kubeconfig is the lab's kubeconfig holding one context per cluster, named
// after the cluster, each with its own admin user.
func (l *Lab) Kubeconfig() string { return filepath.Join(l.Dir, "kubeconfig") }

// writeKubeconfig merges the clusters' admin kubeconfigs into Kubeconfig,
// the first cluster's context current.
func (l *Lab) writeKubeconfig() error {
	merged := clientcmdapi.NewConfig()
	for i, n := range l.Clusters {
		cfg, err := clientcmd.LoadFromFile(n.Kubeconfig())
		if err != nil {
			return fmt.Errorf("cluster %s kubeconfig: %w", n.Name, err)
		}
		ctx, ok := cfg.Contexts[cfg.CurrentContext]
		if !ok {
			return fmt.Errorf("cluster %s kubeconfig: no current context", n.Name)
		}
		user := n.Name + "-admin"
		merged.Clusters[n.Name] = cfg.Clusters[ctx.Cluster]
		merged.AuthInfos[user] = cfg.AuthInfos[ctx.AuthInfo]
		merged.Contexts[n.Name] = &clientcmdapi.Context{Cluster: n.Name, AuthInfo: user}
		if i == 0 {
			merged.CurrentContext = n.Name
		}
	}
	if err := clientcmd.WriteToFile(*merged, l.Kubeconfig()); err != nil {
		return fmt.Errorf("lab kubeconfig: %w", err)
	}
	return nil
}

// Chart is the repository's Helm chart, which the lab installs as it is.
func (l *Lab) Chart() string { return l.own().chart() }

// installPeerlink installs peerlink, the previous release if the lab has
// one, the way how says, as docs/install.md gives it. Before helm install,
// the bundle's own Namespace gives the namespace the Pod Security level
// its pods need, which the lab's clusters, enforcing baseline, give no
// other.
func (l *Lab) installPeerlink(ctx context.Context, n *cluster.Cluster, how Installer) error {
	src := l.first()
	if how != Helm {
		_, err := l.Kubectl(ctx, n, "apply", "-k", l.overlay(src))
		return err
	}
	if _, err := l.Kubectl(ctx, n, "apply", "-f", filepath.Join(src.repo, "bundles", "install", "namespace.yaml")); err != nil {
		return err
	}
	args := []string{"install", "peerlink", src.chart(), "--namespace", PeerlinkNamespace}
	if src.tag != "" {
		args = append(args, "--set", "images.agent.tag="+src.tag)
	}
	if _, err := l.Helm(ctx, n, args...); err != nil {
		return err
	}
	l.progress.Logf("%s: helm %s", n.Name, strings.Join(args, " "))
	return nil
}
