package fabric

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/internal/cidr"
)

// TestFabricNodes takes a node's pod ranges from its spec.podCIDRs, and
// from its CNI's objects only when it has none.
func TestFabricNodes(t *testing.T) {
	node := func(name, addr string, ranges ...string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: ranges},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}}}
	}
	nodes := []corev1.Node{
		node("given", "172.18.0.2", "10.244.0.0/24"),
		node("cilium", "172.18.0.3"),
		node("calico", "172.18.0.4"),
		node("unknown", "172.18.0.5"),
	}
	if got, want := rangeless(nodes), []string{"cilium", "calico", "unknown"}; !slices.Equal(got, want) {
		t.Errorf("rangeless = %v, want %v", got, want)
	}
	cni := map[string][]netip.Prefix{
		"given":  cidr.MustPrefixes("10.9.9.0/24"), // spec.podCIDRs win
		"cilium": cidr.MustPrefixes("10.0.3.0/24"),
		"calico": cidr.MustPrefixes("192.168.7.0/26", "192.168.7.64/26"),
	}
	got := fabricNodes(nodes, cni, plan.IPv4)
	want := []dataplane.FabricNode{
		{Address: netip.MustParseAddr("172.18.0.2"), PodCIDRs: cidr.MustPrefixes("10.244.0.0/24")},
		{Address: netip.MustParseAddr("172.18.0.3"), PodCIDRs: cidr.MustPrefixes("10.0.3.0/24")},
		{Address: netip.MustParseAddr("172.18.0.4"), PodCIDRs: cidr.MustPrefixes("192.168.7.0/26", "192.168.7.64/26")},
	}
	if !slices.EqualFunc(got, want, func(a, b dataplane.FabricNode) bool {
		return a.Address == b.Address && slices.Equal(a.PodCIDRs, b.PodCIDRs)
	}) {
		t.Errorf("fabricNodes = %v, want %v", got, want)
	}
}
