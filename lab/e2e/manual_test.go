package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// TestTwoAdminsByHand peers two clusters whose admins hold only their own
// kubeconfig: they print manifests with `peerlink generate` and
// `peerlink create -o yaml`, apply them with `kubectl apply -f`, and pass
// files to each other.
func TestTwoAdminsByHand(t *testing.T) {
	ctx, l := newLab(t, 10*time.Minute, "hand-a", "hand-b")
	a, b := newAdmins(t, l)
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

	checkPeered(t, ctx, l, a.n, b.n)
}
