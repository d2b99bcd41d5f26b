package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// inBandTable is the host's nftables table that keeps each cluster's node
// network from the other's API server.
const inBandTable = "peerlink-lab-inband"

// TestInBand peers two clusters whose API servers the other cannot reach
// at their normal address (the host, which routes between the node
// networks, drops it), and runs network connect --in-band. From a node of
// each cluster, the kubeconfig the other wrote for it reaches the other's
// API server through the tunnel: it reads the peering's objects and writes
// its PublicKey, and is forbidden Secrets, other namespaces and everything
// cluster-wide. The same kubeconfig pointed at the normal address fails.
func TestInBand(t *testing.T) {
	sideBySide(t)
	ctx, l := newPeeredLab(t, 15*time.Minute, "inband-a", "inband-b")
	a, b := l.Clusters[0], l.Clusters[1]
	blockAPIServers(t, a, b)
	for _, s := range []struct{ of, from *cluster.Cluster }{{a, b}, {b, a}} {
		out, err := inBandKubectl(ctx, l, s.from, s.of.Kubeconfig(), "get", "namespaces", "--request-timeout=5s")
		if err == nil {
			t.Fatalf("a node of %s reached the API server of %s at its normal address:\n%s", s.from.Name, s.of.Name, out)
		}
	}

	dir := t.TempDir()
	if out, err := l.Connect(ctx, a, b, "--in-band", "--in-band-kubeconfig-dir", dir, "--in-band-token-duration", "1h"); err != nil {
		t.Fatalf("connect --in-band: %v\n%s", err, out)
	}
	for _, s := range []struct{ of, from *cluster.Cluster }{{a, b}, {b, a}} {
		kubeconfig := filepath.Join(dir, s.of.ClusterID+".kubeconfig")
		if fi, err := os.Stat(kubeconfig); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the kubeconfig of %s for %s: %v, want a file of mode 0600", s.of.Name, s.from.Name, err)
		}
		checkInBand(t, ctx, l, s.of, s.from, kubeconfig)
	}

	// An admin holding only A's kubeconfig writes the same for B, given
	// where B sees A's API server.
	remapped, err := netip.ParseAddr(kubectlOut(t, ctx, l, a, "get", "ips.ipam.liqo.io", "-n", "peerlink", "peerlink-api-server", "-o", "jsonpath={.status.ip}"))
	if err != nil {
		t.Fatal(err)
	}
	address := netip.AddrPortFrom(externalAddrView(t, ctx, l, b, a, remapped), 6443).String()
	t.Logf("%s remapped its API server %s:6443 to %s, which %s reaches at %s", a.Name, a.NodeIP(), remapped, b.Name, address)
	kc, err := l.Peerlink(ctx, "generate", "kubeconfig", "--kubeconfig", a.Kubeconfig(), "--remote-cluster-id", b.ClusterID, "--address", address, "--duration", "15m")
	if err != nil {
		t.Fatal(err)
	}
	if written, err := os.ReadFile(filepath.Join(dir, a.ClusterID+".kubeconfig")); err != nil || !strings.Contains(string(written), "server: https://"+address+"\n") {
		t.Errorf("connect --in-band wrote for %s a kubeconfig that does not name %s (%v):\n%s", b.Name, address, err, written)
	}
	generated := filepath.Join(dir, "generated.kubeconfig")
	if err := os.WriteFile(generated, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := inBandKubectl(ctx, l, b, generated, "get", "configurations.networking.liqo.io", b.ClusterID); err != nil {
		t.Errorf("%s, through the tunnel with the kubeconfig of generate kubeconfig: %v\n%s", b.Name, err, out)
	}
}

// checkInBand uses, from a node of from, the kubeconfig of cluster of for
// it: what its identity allows works through the tunnel, the rest is
// Forbidden, and at the API server's normal address nothing works.
func checkInBand(t *testing.T, ctx context.Context, l *labctl.Lab, of, from *cluster.Cluster, kubeconfig string) {
	t.Helper()
	peer := from.ClusterID
	what := fmt.Sprintf("%s, through the tunnel with the kubeconfig of %s", from.Name, of.Name)
	// The tunnel's first packets to a remapped host may race the
	// gateways' sync of the new IP object.
	eventually(t, ctx, what+": get its Configuration", func() error {
		out, err := inBandKubectl(ctx, l, from, kubeconfig, "get", "configurations.networking.liqo.io", peer, "-o", "name", "--request-timeout=10s")
		if err != nil {
			return err
		}
		if !strings.Contains(out, peer) {
			return fmt.Errorf("got %q, want its Configuration", out)
		}
		return nil
	})
	for _, args := range [][]string{
		{"get", "gatewayservers.networking.liqo.io,gatewayclients.networking.liqo.io,connections.networking.liqo.io,publickeies.networking.liqo.io"},
		{"annotate", "--overwrite", "publickeies.networking.liqo.io", peer, "peerlink.lab/in-band=written"},
	} {
		if out, err := inBandKubectl(ctx, l, from, kubeconfig, args...); err != nil {
			t.Errorf("%s: kubectl %s: %v\n%s", what, strings.Join(args, " "), err, out)
		}
	}
	if got := kubectlOut(t, ctx, l, of, "get", "publickeies.networking.liqo.io", "-n", manifests.TenantNamespace(peer), peer, "-o", "jsonpath={.metadata.annotations.peerlink\\.lab/in-band}"); got != "written" {
		t.Errorf("%s: the PublicKey's annotation on %s is %q, want written", what, of.Name, got)
	}
	for _, args := range [][]string{
		{"get", "secrets"},
		{"get", "configmaps"},
		{"get", "pods"},
		{"delete", "configurations.networking.liqo.io", peer},
		{"get", "configurations.networking.liqo.io", "-n", "default"},
		{"get", "configurations.networking.liqo.io", "--all-namespaces"},
		{"get", "ips.ipam.liqo.io", "-n", "peerlink"},
		{"get", "nodes"},
		{"get", "namespaces"},
	} {
		out, err := inBandKubectl(ctx, l, from, kubeconfig, args...)
		if err == nil || !strings.Contains(out, "Forbidden") {
			t.Errorf("%s: kubectl %s: %v, want Forbidden:\n%s", what, strings.Join(args, " "), err, out)
		}
	}
	normal := "https://" + of.NodeIP().String() + ":6443"
	if out, err := inBandKubectl(ctx, l, from, kubeconfig, "--server", normal, "--request-timeout=5s", "get", "configurations.networking.liqo.io"); err == nil {
		t.Errorf("%s: reached %s, the API server's blocked normal address:\n%s", what, normal, out)
	} else if strings.Contains(out, "Forbidden") {
		t.Errorf("%s: %s answered, the API server's blocked normal address:\n%s", what, normal, out)
	}
}

// inBandKubectl runs kubectl with a kubeconfig in the network namespace of
// the last node of cluster n, and returns its combined output.
func inBandKubectl(ctx context.Context, l *labctl.Lab, n *cluster.Cluster, kubeconfig string, args ...string) (string, error) {
	nodes := n.Nodes()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	argv := netns.Enter(nodes[len(nodes)-1].Namespace(), append([]string{l.KubectlBin, "--kubeconfig", kubeconfig}, args...)...)
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	return string(out), err
}

// blockAPIServers makes the host drop what either cluster's node network
// sends the other's API server at its normal address, until the test ends.
func blockAPIServers(t *testing.T, a, b *cluster.Cluster) {
	t.Helper()
	rules := fmt.Sprintf(`table inet %s {
	chain forward {
		type filter hook forward priority -10; policy accept;
		ip saddr %s ip daddr %s tcp dport 6443 drop
		ip saddr %s ip daddr %s tcp dport 6443 drop
	}
}
`, inBandTable, b.NodeNetwork(), a.NodeIP(), a.NodeNetwork(), b.NodeIP())
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("block the API servers: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("nft", "delete", "table", "inet", inBandTable).CombinedOutput(); err != nil {
			t.Errorf("unblock the API servers: %v: %s", err, out)
		}
	})
}
