package e2e

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestInstallOneShot installs peerlink on empty clusters as a new user
// does, in one run and with no facts given: `kubectl apply -k
// bundles/install` client-side on one cluster, server-side on another, and
// `peerlink install` on a third. The controller comes up, detects the
// cluster ID, pod and service CIDRs, publishes them with their sources,
// applies the default gateway templates, and the clusters peer.
func TestInstallOneShot(t *testing.T) {
	sideBySide(t)
	ctx, l := newLabWith(t, 15*time.Minute, labctl.Options{Names: []string{"inst-a", "inst-b", "inst-c"}, SkipInstall: true})
	for i, n := range l.Clusters {
		var err error
		var out []byte
		switch i {
		case 0:
			out, err = l.Kubectl(ctx, n, "apply", "-k", l.InstallBundle())
		case 1:
			out, err = l.Kubectl(ctx, n, "apply", "--server-side", "-k", l.InstallBundle())
		case 2:
			out, err = l.Peerlink(ctx, "install", "--kubeconfig", n.Kubeconfig())
			t.Logf("peerlink install:\n%s", out)
		}
		if err != nil {
			t.Fatalf("%s: the first install failed: %v\n%s", n.Name, err, out)
		}
		if err := l.WaitInstalled(ctx, n); err != nil {
			t.Fatal(err)
		}

		cs, err := n.Clientset()
		if err != nil {
			t.Fatal(err)
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm, err := cs.CoreV1().ConfigMaps(labctl.PeerlinkNamespace).Get(ctx, clusterinfo.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		info, err := clusterinfo.Decode(cm.Data)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: detected %v", n.Name, cm.Data)
		if !strings.HasPrefix(strings.ReplaceAll(string(ns.UID), "-", ""), info.ClusterID) || len(info.ClusterID) < 8 {
			t.Errorf("%s: cluster ID %q, want the start of the kube-system UID %s", n.Name, info.ClusterID, ns.UID)
		}
		if !slices.Equal(info.PodCIDRs, []netip.Prefix{n.PodCIDR}) {
			t.Errorf("%s: pod CIDRs %v, want the cluster's %s", n.Name, info.PodCIDRs, n.PodCIDR)
		}
		if info.ServiceCIDR != n.ServiceCIDR {
			t.Errorf("%s: service CIDR %s, want the cluster's %s", n.Name, info.ServiceCIDR, n.ServiceCIDR)
		}
		for key, want := range map[string]string{
			clusterinfo.KeyClusterID: clusterinfo.SourceNamespaceUID,
			clusterinfo.KeyPodCIDRs:  clusterinfo.SourceNodes,
		} {
			if got := info.Sources[key]; got != want {
				t.Errorf("%s: %s comes from %q, want %q", n.Name, key, got, want)
			}
		}
		if src := info.Sources[clusterinfo.KeyServiceCIDR]; src != clusterinfo.SourceServiceAllocator && src != clusterinfo.SourceServiceCIDRAPI {
			t.Errorf("%s: service CIDR from %q", n.Name, src)
		}
		// The controller applied the default templates the bundle no
		// longer carries.
		for _, kind := range []string{"wggatewayservertemplates", "wggatewayclienttemplates"} {
			out, err := l.Kubectl(ctx, n, "get", kind, "-n", labctl.PeerlinkNamespace, "-o", "name")
			if err != nil || len(strings.Fields(string(out))) != 1 {
				t.Errorf("%s: %s: %q (%v), want the default one", n.Name, kind, out, err)
			}
		}
		// A fresh cluster's nodes hold nothing the detection missed.
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, node := range nodes.Items {
			checkNodeInside(t, node, info)
		}
	}

	a := l.Clusters[0]
	for _, b := range l.Clusters[1:] {
		if out, err := l.Connect(ctx, a, b); err != nil {
			t.Fatalf("connect: %v\n%s", err, out)
		}
	}
	for _, b := range l.Clusters[1:] {
		checkPeered(t, ctx, l, a, b)
	}
}

// checkNodeInside checks that the pod ranges of node lie in the detected
// pod CIDRs.
func checkNodeInside(t *testing.T, node corev1.Node, info clusterinfo.Info) {
	t.Helper()
	for _, s := range node.Spec.PodCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			t.Errorf("node %s: %v", node.Name, err)
			continue
		}
		if !slices.ContainsFunc(info.PodCIDRs, func(c netip.Prefix) bool { return c.Contains(p.Addr()) && c.Bits() <= p.Bits() }) {
			t.Errorf("node %s pod range %s is outside the detected %v", node.Name, p, info.PodCIDRs)
		}
	}
}
