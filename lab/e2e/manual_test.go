package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/lab/internal/node"
)

// admin is the administrator of one cluster: the kubeconfig of that cluster
// only, and a directory of the files they write and receive.
type admin struct {
	l   *labctl.Lab
	n   *node.Node
	dir string
}

func newAdmin(t *testing.T, l *labctl.Lab, n *node.Node) *admin {
	t.Helper()
	dir := filepath.Join(t.TempDir(), n.ClusterID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &admin{l: l, n: n, dir: dir}
}

// peerlink runs the CLI against the admin's own cluster and writes its
// standard output to the file out in the admin's directory, unless out is
// empty.
func (a *admin) peerlink(t *testing.T, ctx context.Context, out string, args ...string) string {
	t.Helper()
	b, err := a.l.Peerlink(ctx, append(args, "--kubeconfig", a.n.Kubeconfig())...)
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

// offline runs the CLI without any cluster, as `create -o yaml` allows, and
// writes its output to the file out.
func (a *admin) offline(t *testing.T, ctx context.Context, out string, args ...string) string {
	t.Helper()
	b, err := a.l.Peerlink(ctx, append(args, "--kubeconfig", filepath.Join(a.dir, "no-cluster"))...)
	if err != nil {
		t.Fatalf("%s: %v", a.n.ClusterID, err)
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

// namespaceFile writes the manifest of a namespace, as an admin would
// before applying objects into it.
func (a *admin) namespaceFile(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(a.dir, name+".yaml")
	// The level the gateway pod needs (docs/security.md): the lab enforces
	// baseline elsewhere.
	ns := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n  labels:\n    pod-security.kubernetes.io/enforce: privileged\n"
	if err := os.WriteFile(path, []byte(ns), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTwoAdminsByHand peers two clusters whose admins hold only their own
// kubeconfig: they print manifests with `peerlink generate` and
// `peerlink create -o yaml`, apply them with `kubectl apply -f`, and pass
// files to each other.
func TestTwoAdminsByHand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	l := newLab(t, ctx, "hand-a", "hand-b")
	a, b := newAdmin(t, l, l.Nodes[0]), newAdmin(t, l, l.Nodes[1])
	idA, idB := a.n.ClusterID, b.n.ClusterID

	// B, the server, exposes a gateway for A and tells A where it is.
	nsOnB := netv1beta1.TenantNamespacePrefix + idA
	server := b.offline(t, ctx, "gatewayserver.yaml", "create", "gatewayserver", idA,
		"--remote-cluster-id", idA, "--service-type", "NodePort", "-o", "yaml")
	b.kubectl(t, ctx, "apply", "-f", b.namespaceFile(t, nsOnB), "-f", server)
	var endpoint struct {
		Addresses []string `json:"addresses"`
		Port      int32    `json:"port"`
	}
	eventually(t, ctx, "the endpoint of the gateway server on "+idB, func() error {
		out := b.kubectl(t, ctx, "-n", nsOnB, "get", "gatewayserver", idA, "-o", "jsonpath={.status.endpoint}")
		if out == "" {
			return fmt.Errorf("no endpoint yet")
		}
		if err := json.Unmarshal([]byte(out), &endpoint); err != nil {
			return err
		}
		if len(endpoint.Addresses) == 0 || endpoint.Port == 0 {
			return fmt.Errorf("endpoint %s incomplete", out)
		}
		return nil
	})
	confB := b.peerlink(t, ctx, "configuration.yaml", "generate", "configuration")
	keyB := b.peerlink(t, ctx, "publickey.yaml", "generate", "publickey", "--gateway-type", "server", "--gateway-name", idA)
	toA := []string{b.send(t, confB, a), b.send(t, keyB, a)}

	// A, the client, dials B's endpoint, applies what B sent and answers
	// with its own facts and key.
	nsOnA := netv1beta1.TenantNamespacePrefix + idB
	clientGW := a.offline(t, ctx, "gatewayclient.yaml", "create", "gatewayclient", idB,
		"--remote-cluster-id", idB, "--addresses", strings.Join(endpoint.Addresses, ","),
		"--port", fmt.Sprint(endpoint.Port), "-o", "yaml")
	a.kubectl(t, ctx, "apply", "-f", a.namespaceFile(t, nsOnA), "-f", clientGW, "-f", toA[0], "-f", toA[1])
	confA := a.peerlink(t, ctx, "configuration.yaml", "generate", "configuration")
	keyA := a.peerlink(t, ctx, "publickey.yaml", "generate", "publickey", "--gateway-type", "client", "--gateway-name", idB)
	toB := []string{a.send(t, confA, b), a.send(t, keyA, b)}

	// B applies what A sent.
	b.kubectl(t, ctx, "apply", "-f", toB[0], "-f", toB[1])

	waitConnected(t, ctx, l, a.n, b.n)
	podsA, podsB := echoPods(t, ctx, l, a.n), echoPods(t, ctx, l, b.n)
	checkTraffic(t, ctx, l, a.n, podsA[0], b.n, podsB[1])
	checkTraffic(t, ctx, l, b.n, podsB[0], a.n, podsA[1])
}
