package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
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

	logFile, err := c.logFile(t, "kube-controller-manager")
	if err != nil {
		return err
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfigFile,
		// Delegated authn/authz is only for its own HTTPS endpoint, which
		// is off: no port to collide between parallel clusters.
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=*",
		"--service-account-private-key-file=" + saKey,
		"--root-ca-file=" + caFile,
		"--cluster-name=testcluster",
	}, flags...)

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kube-controller-manager"), args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = kcmStopTimeout
	if err := cmd.Start(); err != nil {
		cancel()
		return fmt.Errorf("start kube-controller-manager: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		err := <-exited
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Errorf("testcluster: stop kube-controller-manager: %v", err)
		}
	})

	// The serviceaccount controller creating default/default shows that the
	// controllers run.
	ready, readyCancel := context.WithTimeout(ctx, kcmReadyTimeout)
	defer readyCancel()
	var (
		hasExited bool
		exitErr   error
	)
	err = wait.PollUntilContextCancel(ready, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case exitErr = <-exited:
			hasExited = true
			exited <- exitErr
			return false, errors.New("kube-controller-manager exited")
		default:
		}
		var sa corev1.ServiceAccount
		return c.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "default"}, &sa) == nil, nil
	})
	if hasExited {
		return fmt.Errorf("kube-controller-manager exited (%v); its log ends with:\n%s", exitErr, tail(logFile.Name(), 20))
	}
	if err != nil {
		return fmt.Errorf("wait for kube-controller-manager to create the default service account: %w", err)
	}
	return nil
}
