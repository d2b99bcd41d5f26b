package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/kube"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestGitOps peers two clusters through peer bundles, as Argo CD or Flux
// would apply them (server-side apply of a kustomize directory), with
// exactly two files passed between the admins; then an MTU change
// committed on both sides converges.
func TestGitOps(t *testing.T) {
	sideBySide(t)
	ctx, l := newLab(t, 10*time.Minute, "git-a", "git-b")
	a, b := newAdmins(t, l)
	idA, idB := a.n.ClusterID, b.n.ClusterID
	bundleA := filepath.Join(a.dir, "peers", idB)
	bundleB := filepath.Join(b.dir, "peers", idA)
	sync := func(ad *admin, bundle string) {
		t.Helper()
		ad.kubectl(t, ctx, "apply", "--server-side", "-k", bundle)
	}

	// A, the client, commits its bundle and exports file 1.
	a.offline(t, ctx, "init.log", "bundle", "init", bundleA, "--peer", idB, "--role", "client")
	sync(a, bundleA)
	a.peerlink(t, ctx, "", "bundle", "export", "--peer", idB, "-o", filepath.Join(a.dir, "to-"+idB+".yaml"))
	file1 := a.send(t, filepath.Join(a.dir, "to-"+idB+".yaml"), b)

	// B, the server, commits its bundle with file 1 and exports file 2.
	b.offline(t, ctx, "init.log", "bundle", "init", bundleB, "--peer", idA, "--role", "server", "--service-type", "NodePort")
	b.offline(t, ctx, "add.log", "bundle", "add", bundleB, file1)
	sync(b, bundleB)
	b.peerlink(t, ctx, "", "bundle", "export", "--peer", idA, "-o", filepath.Join(b.dir, "to-"+idA+".yaml"))
	file2 := b.send(t, filepath.Join(b.dir, "to-"+idA+".yaml"), a)

	// A commits file 2.
	a.offline(t, ctx, "add.log", "bundle", "add", bundleA, file2)
	sync(a, bundleA)

	podsA, podsB := checkPeered(t, ctx, l, a.n, b.n)

	// Both admins lower the MTU in their gateway and commit it.
	const mtu = 1280
	for _, side := range []struct {
		ad     *admin
		bundle string
		file   string
	}{{a, bundleA, "gatewayclient.yaml"}, {b, bundleB, "gatewayserver.yaml"}} {
		editFile(t, filepath.Join(side.bundle, side.file), fmt.Sprintf("mtu: %d\n", netv1beta1.DefaultMTU), fmt.Sprintf("mtu: %d\n", mtu))
		sync(side.ad, side.bundle)
	}
	for _, ad := range []*admin{a, b} {
		eventually(t, ctx, "the gateway of "+ad.n.ClusterID+" runs with the new MTU", func() error {
			return gatewayRunsWithMTU(ctx, l, ad, mtu)
		})
	}
	checkPeered(t, ctx, l, a.n, b.n)
	// Full-size segments cross the smaller tunnel (MSS clamped to it).
	to, err := l.RemappedIP(ctx, a.n, b.n, podsB[0].Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.Measure(ctx, a.n, podsA[0].Name, "stream", fmt.Sprintf("%s:%d", to, labctl.EchoSinkPort), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Bytes < 1<<20 {
		t.Errorf("a 2 s stream through the tunnel with MTU %d carried %d bytes", mtu, m.Bytes)
	}
}

// gatewayRunsWithMTU checks that the only running gateway pod of the
// admin's cluster is one started with --mtu=mtu.
func gatewayRunsWithMTU(ctx context.Context, l *labctl.Lab, ad *admin, mtu int) error {
	cs, err := ad.n.Clientset()
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: netv1beta1.ActiveGatewayLabel})
	if err != nil {
		return err
	}
	if len(pods.Items) != 1 {
		return fmt.Errorf("%d gateway pods", len(pods.Items))
	}
	p := pods.Items[0]
	if !kube.PodReady(&p) {
		return fmt.Errorf("gateway pod %s not ready", p.Name)
	}
	for _, arg := range p.Spec.Containers[0].Args {
		if arg == fmt.Sprintf("--mtu=%d", mtu) {
			return nil
		}
	}
	return fmt.Errorf("gateway pod %s runs with %v", p.Name, p.Spec.Containers[0].Args)
}
