package reconciler

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// TestDetectPodCIDRsFamilies checks the controller's pod CIDRs on clusters
// of either family: an IPv6-only cluster peers its IPv6 range, a
// dual-stack one both families, with the IPv6 service range reserved.
func TestDetectPodCIDRsFamilies(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithAPIServerFlag("service-cluster-ip-range", "10.43.0.0/16,fd00:10:96::/112"))
	ctx := t.Context()
	detect := func() (ClusterFacts, error) {
		f := ClusterFacts{Namespace: metav1.NamespaceDefault}
		f.ClusterID = "cluster-a"
		err := f.Detect(ctx, c.Client, c.Client)
		return f, err
	}
	node := func(name string, ranges ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: ranges[0], PodCIDRs: ranges}}
		if err := c.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	v6 := node("v6", "fd00:10:244::/64")
	f, err := detect()
	if want := cidr.MustPrefixes("fd00:10:244::/48"); err != nil || !slices.Equal(f.PodCIDRs, want) {
		t.Errorf("IPv6-only cluster: pod CIDRs %v (%v), want %v", f.PodCIDRs, err, want)
	}
	if err := c.Client.Delete(ctx, v6); err != nil {
		t.Fatal(err)
	}

	node("n1", "10.244.0.0/24", "fd00:10:244::/64")
	node("n2", "10.244.1.0/24", "fd00:10:244:1::/64")
	f, err = detect()
	if err != nil {
		t.Fatal(err)
	}
	if want := cidr.MustPrefixes("10.244.0.0/16", "fd00:10:244::/48"); !slices.Equal(f.PodCIDRs, want) || f.Sources[clusterinfo.KeyPodCIDRs] != clusterinfo.SourceNodes {
		t.Errorf("dual-stack cluster: pod CIDRs %v from %q, want %v from %q", f.PodCIDRs, f.Sources[clusterinfo.KeyPodCIDRs], want, clusterinfo.SourceNodes)
	}
	if f.ServiceCIDR != netip.MustParsePrefix("10.43.0.0/16") || !slices.Contains(f.ReservedCIDRs, netip.MustParsePrefix("fd00:10:96::/112")) {
		t.Errorf("dual-stack cluster: service CIDR %s, reserved %v; want 10.43.0.0/16 and the IPv6 service range reserved", f.ServiceCIDR, f.ReservedCIDRs)
	}
}
