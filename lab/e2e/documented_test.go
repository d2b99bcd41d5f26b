package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestDocumentedCommands runs the command lines of the network-peering
// documents as they are written, with peerlink for the reference CLI:
// network init, connect, disconnect and reset with both kubeconfigs, then
// the eight steps of two admins who each hold only their own kubeconfig
// and pass generated manifests to each other. Each way ends Connected with
// traffic both ways.
func TestDocumentedCommands(t *testing.T) {
	sideBySide(t)
	ctx, l := newLab(t, 12*time.Minute, "doc-a", "doc-b")
	a, b := newAdmins(t, l)
	ka, kb := a.n.Kubeconfig(), b.n.Kubeconfig()

	peerlink(t, ctx, l, "network", "init", "--kubeconfig", ka, "--remote-kubeconfig", kb, "--wait")
	for _, side := range [][2]*cluster.Cluster{{a.n, b.n}, {b.n, a.n}} {
		if _, _, err := l.PodCIDRView(ctx, side[0], side[1]); err != nil {
			t.Fatalf("after network init: %v", err)
		}
	}
	peerlink(t, ctx, l, "network", "connect", "--kubeconfig", ka, "--remote-kubeconfig", kb, "--server-service-type", "NodePort", "--wait")
	podsA, podsB := checkPeered(t, ctx, l, a.n, b.n)

	// The destructive commands ask first: no answer removes nothing, a yes
	// goes on.
	disconnect := []string{"network", "disconnect", "--kubeconfig", ka, "--remote-kubeconfig", kb, "--wait"}
	if out, err := answer(ctx, l, "", disconnect...); err == nil || !strings.Contains(out, "--skip-confirm") {
		t.Fatalf("disconnect without an answer: %v\n%s", err, out)
	}
	if st, err := l.ConnectionState(ctx, a.n, b.n); err != nil || st != "Connected" {
		t.Fatalf("a disconnect without an answer left the Connection %q (%v)", st, err)
	}
	if out, err := answer(ctx, l, "yes\n", disconnect...); err != nil {
		t.Fatalf("disconnect: %v\n%s", err, out)
	}
	for _, side := range [][2]*cluster.Cluster{{a.n, b.n}, {b.n, a.n}} {
		// --wait: the gateways are gone when the command returns.
		if left := peeringObjects(t, ctx, l, side[0], side[1], []string{"gatewayservers", "gatewayclients", "publickeies"}); len(left) > 0 {
			t.Errorf("%s after disconnect --wait: %v left", side[0].ClusterID, left)
		}
	}
	if got, err := l.Reach(ctx, a.n, podsA[0], b.n, podsB[0]); err == nil {
		t.Errorf("%s still reaches %s after disconnect: %+v", a.n.ClusterID, b.n.ClusterID, got)
	}
	if out, err := answer(ctx, l, "yes\n", "network", "reset", "--kubeconfig", ka, "--remote-kubeconfig", kb, "--wait"); err != nil {
		t.Fatalf("reset: %v\n%s", err, out)
	}
	for _, side := range [][2]*cluster.Cluster{{a.n, b.n}, {b.n, a.n}} {
		if left := peeringObjects(t, ctx, l, side[0], side[1], append(gatewayKinds(), "configurations")); len(left) > 0 {
			t.Errorf("%s after reset --wait: %v left", side[0].ClusterID, left)
		}
	}

	// The eight steps, A the client, B the server. 1: the cluster IDs.
	idA := strings.TrimSpace(a.peerlink(t, ctx, "", "info", "--get", "clusterid"))
	idB := strings.TrimSpace(b.peerlink(t, ctx, "", "info", "--get", "clusterid"))
	if idA != a.n.ClusterID || idB != b.n.ClusterID {
		t.Fatalf("info --get clusterid: %q and %q, want %q and %q", idA, idB, a.n.ClusterID, b.n.ClusterID)
	}
	// 2: each cluster's Configuration, applied on the other.
	b.kubectl(t, ctx, "apply", "-f", a.send(t, a.peerlink(t, ctx, "conf.yaml", "generate", "configuration"), b))
	a.kubectl(t, ctx, "apply", "-f", b.send(t, b.peerlink(t, ctx, "conf.yaml", "generate", "configuration"), a))
	// 3: the gateway server on B.
	b.kubectl(t, ctx, "apply", "-f", b.offline(t, ctx, "gws.yaml", "create", "gatewayserver", "server",
		"--remote-cluster-id", idA, "--service-type", "NodePort", "-o", "yaml"))
	// 4: its endpoint, as B's admin reads it to send it to A.
	var endpoint struct {
		Addresses []string `json:"addresses"`
		Port      int32    `json:"port"`
	}
	eventually(t, ctx, "the endpoint of the gateway server on "+idB, func() error {
		out := b.peerlink(t, ctx, "", "info", "peer", idA, "--get", "network.gateway")
		if err := yaml.Unmarshal([]byte(out), &endpoint); err != nil {
			return fmt.Errorf("info peer --get network.gateway: %w: %s", err, out)
		}
		if len(endpoint.Addresses) == 0 || endpoint.Port == 0 {
			return fmt.Errorf("no endpoint yet: %s", out)
		}
		return nil
	})
	// 5: the gateway client on A.
	a.kubectl(t, ctx, "apply", "-f", a.offline(t, ctx, "gwc.yaml", "create", "gatewayclient", "client",
		"--remote-cluster-id", idB, "--addresses", endpoint.Addresses[0], "--port", fmt.Sprint(endpoint.Port), "-o", "yaml"))
	// 6 and 7: the public keys, each applied on the other cluster.
	b.kubectl(t, ctx, "apply", "-f", a.send(t, a.peerlink(t, ctx, "pk.yaml", "generate", "publickey", "--gateway-type", "client", "--gateway-name", "client"), b))
	a.kubectl(t, ctx, "apply", "-f", b.send(t, b.peerlink(t, ctx, "pk.yaml", "generate", "publickey", "--gateway-type", "server", "--gateway-name", "server"), a))
	// 8: the Connections, as kubectl lists them.
	for _, ad := range []*admin{a, b} {
		eventually(t, ctx, "kubectl get connections -A on "+ad.n.ClusterID+" says Connected", func() error {
			if out := ad.kubectl(t, ctx, "get", "connections", "-A"); !strings.Contains(out, "Connected") {
				return fmt.Errorf("%s", out)
			}
			return nil
		})
	}
	checkPeered(t, ctx, l, a.n, b.n)
}

// answer runs the peerlink CLI with in on its standard input, as a user
// answering its question would, and returns what it printed.
func answer(ctx context.Context, l *labctl.Lab, in string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, l.PeerlinkBin(), args...)
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
