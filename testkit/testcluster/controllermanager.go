package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

const (
	// saSigningKey is the file, in the API server's cert dir, of the key
	// envtest makes the API server sign service account tokens with
	// (--service-account-signing-key-file).
	saSigningKey = "sa-signer.key"
	// kcmReadyTimeout bounds the wait for the controller manager to work.
	kcmReadyTimeout = time.Minute
	// kcmStopTimeout is how long the controller manager gets to exit after
	// SIGTERM before it is killed.
	kcmStopTimeout = 10 * time.Second
)

// startControllerManager runs kube-controller-manager against the API server
// of env, with an admin kubeconfig, the API server's service account signing
// key and its serving CA, and waits until it has created the default
// ServiceAccount of the default namespace.
func (c *Cluster) startControllerManager(t testing.TB, flags []string) error {
	api := c.env.ControlPlane.GetAPIServer()

	saKey := filepath.Join(api.CertDir, saSigningKey)
	if _, err := os.Stat(saKey); err != nil {
		return fmt.Errorf("find the service account signing key of envtest's API server: %w", err)
	}
	caFile := filepath.Join(c.Dir, "ca.crt")
	if err := os.WriteFile(caFile, api.SecureServing.CA, 0o600); err != nil {
		return fmt.Errorf("write API server CA: %w", err)
	}
	kubeconfigFile, err := c.userKubeconfig("system:kube-controller-manager", "system:masters")
	if err != nil {
		return fmt.Errorf("controller manager: %w", err)
	}

	args := []string{filepath.Join(c.BinDir, "kube-controller-manager"),
		"--kubeconfig=" + kubeconfigFile,
		// Delegated authn/authz is only for its own HTTPS endpoint, which
		// is off: no port to collide between parallel clusters.
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=*",
		"--service-account-private-key-file=" + saKey,
		"--root-ca-file=" + caFile,
		"--cluster-name=testcluster",
	}
	p, err := proc.Start(proc.Spec{
		Name: "kube-controller-manager",
		Argv: append(args, flags...),
		Log:  c.logPath(t, "kube-controller-manager"),
	})
	if err != nil {
		return err
	}
	// Stop ends it, killed after kcmStopTimeout if need be: how it ended
	// (an exit status, SIGTERM or SIGKILL) tells nothing about the test.
	t.Cleanup(func() { _ = p.Stop(kcmStopTimeout) })

	// The serviceaccount controller creating default/default shows that the
	// controllers run.
	ctx, cancel := context.WithTimeout(context.Background(), kcmReadyTimeout)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Exited:
			return false, p.Failure()
		default:
		}
		var sa corev1.ServiceAccount
		return c.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "default"}, &sa) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for kube-controller-manager to create the default service account: %w", err)
	}
	return nil
}
