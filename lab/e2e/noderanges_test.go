package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestNodesWithoutPodRanges runs two clusters whose Nodes have no
// spec.podCIDRs, as a CNI with its own IPAM leaves them (lab up
// --node-pod-cidrs=false). With nothing else to read, `peerlink install`
// fails, saying the controller cannot find the pod ranges and which fact
// gives them. Once the cluster holds the records Calico's IPAM keeps (an
// IPPool of the pod range, a confirmed BlockAffinity of each node's block,
// under Calico's own CRDs), the controller detects the pod range from the
// pool and the fabric routes each node's block from its affinity: the two
// clusters peer, and pods on both nodes of each reach the other's both
// ways.
func TestNodesWithoutPodRanges(t *testing.T) {
	sideBySide(t)
	ctx, l := newLabWith(t, 20*time.Minute, labctl.Options{Names: []string{"noranges-a", "noranges-b"}, Nodes: 2, NoNodePodCIDRs: true, SkipInstall: true})
	a, b := l.Clusters[0], l.Clusters[1]
	for _, n := range l.Clusters {
		if got := kubectlOut(t, ctx, l, n, "get", "nodes", "-o", "jsonpath={.items[*].spec.podCIDRs}"); got != "" {
			t.Fatalf("%s: the Nodes have pod ranges %s, want none", n.Name, got)
		}
	}

	out, err := l.Peerlink(ctx, "install", "--kubeconfig", a.Kubeconfig(), "--timeout", "4m")
	t.Logf("peerlink install with no pod ranges to find:\n%s\n%v", out, err)
	if err == nil {
		t.Fatal("peerlink install succeeded on a cluster whose pod ranges nothing records")
	}
	for _, want := range []string{"the controller stopped", "spec.podCIDRs", "--pod-cidr"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the failed install does not say %q: %v", want, err)
		}
	}

	for _, n := range l.Clusters {
		crds, records := calicoRecords(n)
		// The CRDs first: their kinds are served once Established.
		for i, doc := range []string{crds, records} {
			path := filepath.Join(t.TempDir(), fmt.Sprintf("calico-%d.yaml", i))
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			kubectlOut(t, ctx, l, n, "apply", "-f", path)
			if i == 0 {
				kubectlOut(t, ctx, l, n, "wait", "--for=condition=Established", "crd/ippools.crd.projectcalico.org", "crd/blockaffinities.crd.projectcalico.org")
			}
		}
		if out, err := l.Peerlink(ctx, "install", "--kubeconfig", n.Kubeconfig(), "--timeout", "4m"); err != nil {
			t.Fatalf("%s: peerlink install with Calico's records: %v\n%s", n.Name, err, out)
		}
		if err := l.WaitInstalled(ctx, n); err != nil {
			t.Fatal(err)
		}
		c, err := l.Client(n)
		if err != nil {
			t.Fatal(err)
		}
		info, err := clusterinfo.Read(ctx, c, labctl.PeerlinkNamespace)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.PodCIDRs) != 1 || info.PodCIDRs[0] != n.PodCIDR || info.Sources[clusterinfo.KeyPodCIDRs] != clusterinfo.SourceCalicoIPPools {
			t.Errorf("%s: pod CIDRs %v from %q, want %s from %q", n.Name, info.PodCIDRs, info.Sources[clusterinfo.KeyPodCIDRs], n.PodCIDR, clusterinfo.SourceCalicoIPPools)
		}
	}

	if out, err := l.Connect(ctx, a, b); err != nil {
		t.Fatalf("connect %s to %s: %v\n%s", a.Name, b.Name, err, out)
	}
	waitConnected(t, ctx, l, a, b)
	placed := map[*cluster.Cluster][]corev1.Pod{a: placedPods(t, ctx, l, a), b: placedPods(t, ctx, l, b)}
	for _, from := range placed[a] {
		for _, to := range placed[b] {
			checkTraffic(t, ctx, l, a, from, b, to)
			checkTraffic(t, ctx, l, b, to, a, from)
		}
	}
}

// calicoRecords is what Calico's IPAM would keep for n: its CRDs (as much
// of them as peerlink reads), then an enabled IPPool of the pod range and a
// confirmed BlockAffinity of each node's block.
func calicoRecords(n *cluster.Cluster) (crds, records string) {
	var b strings.Builder
	for _, kind := range []struct{ kind, plural string }{{"IPPool", "ippools"}, {"BlockAffinity", "blockaffinities"}} {
		fmt.Fprintf(&b, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[2]s.crd.projectcalico.org
spec:
  group: crd.projectcalico.org
  scope: Cluster
  names: {kind: %[1]s, listKind: %[1]sList, plural: %[2]s, singular: %[3]s}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
`, kind.kind, kind.plural, strings.ToLower(kind.kind))
	}
	crds = b.String()
	b.Reset()
	fmt.Fprintf(&b, `apiVersion: crd.projectcalico.org/v1
kind: IPPool
metadata:
  name: default-ipv4-ippool
spec: {cidr: %s, blockSize: %d, natOutgoing: true}
`, n.PodCIDR, n.NodeMaskSize())
	for name, block := range n.NodeRanges() {
		fmt.Fprintf(&b, `---
apiVersion: crd.projectcalico.org/v1
kind: BlockAffinity
metadata:
  name: %s-%s
spec: {cidr: %s, node: %s, state: confirmed, deleted: "false"}
`, name, strings.NewReplacer(".", "-", "/", "-").Replace(block.String()), block, name)
	}
	return crds, b.String()
}
