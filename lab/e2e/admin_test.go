package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// admin is the administrator of one cluster: the kubeconfig of that cluster
// only, and a directory of the files they write and receive.
type admin struct {
	l   *labctl.Lab
	n   *cluster.Cluster
	dir string
}

func newAdmin(t *testing.T, l *labctl.Lab, n *cluster.Cluster) *admin {
	t.Helper()
	dir := filepath.Join(t.TempDir(), n.ClusterID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &admin{l: l, n: n, dir: dir}
}

// newAdmins returns the admins of the first two clusters of l.
func newAdmins(t *testing.T, l *labctl.Lab) (a, b *admin) {
	t.Helper()
	return newAdmin(t, l, l.Clusters[0]), newAdmin(t, l, l.Clusters[1])
}

// peerlink runs the CLI against the admin's own cluster (see run).
func (a *admin) peerlink(t *testing.T, ctx context.Context, out string, args ...string) string {
	t.Helper()
	return a.run(t, ctx, out, append(args, "--kubeconfig", a.n.Kubeconfig()))
}

// offline runs the CLI without any cluster, as `create -o yaml` allows (see
// run).
func (a *admin) offline(t *testing.T, ctx context.Context, out string, args ...string) string {
	t.Helper()
	return a.run(t, ctx, out, append(args, "--kubeconfig", filepath.Join(a.dir, "no-cluster")))
}

// run runs the CLI and writes its standard output to the file out in the
// admin's directory, returning its path; with out empty, it returns the
// output itself.
func (a *admin) run(t *testing.T, ctx context.Context, out string, args []string) string {
	t.Helper()
	b, err := a.l.Peerlink(ctx, args...)
	if err != nil {
		t.Fatalf("%s: %v", a.n.ClusterID, err)
	}
	if out == "" {
		return string(b)
	}
	path := filepath.Join(a.dir, out)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubectl runs kubectl against the admin's own cluster.
func (a *admin) kubectl(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := a.l.Kubectl(ctx, a.n, args...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// send hands a file to the other admin, as mail or a pull request would.
func (a *admin) send(t *testing.T, path string, to *admin) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(to.dir, "from-"+a.n.ClusterID+"-"+filepath.Base(path))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
