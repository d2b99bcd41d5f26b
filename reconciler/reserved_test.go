package reconciler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/reconciler/configuration"
)

// TestConfigurationPeerRanges checks what the controller makes of a peer's
// ranges that it must never route as they are: special-use or outside
// the allowlist (refused: that Configuration stalls, the others stay
// Ready; TestConfigurationIPv6 has the IPv6 ones), or holding a node address, a node's subnet or a
// gateway endpoint of this cluster (remapped away, also when the node or
// gateway comes later).
func TestConfigurationPeerRanges(t *testing.T) {
	e := newConfEnv(t, "peerlink", "peers")
	// A node is there before the controller starts.
	e.createNode(t, "n1", "10.250.0.5", "203.0.113.7")
	e.run(t)
	const ns = "peers"

	e.create(t, newConf(ns, "good", "good", []string{"10.245.0.0/16"}))
	e.waitRemapped(t, ns, "good", []string{"10.245.0.0/16"})

	t.Run("refused ranges stall their Configuration only", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			pod      []string
			external []string
			reason   string
			msg      string
		}{
			{"link-local", []string{"10.246.0.0/16"}, []string{"169.254.0.0/16"}, configuration.ReasonRefusedCIDR,
				"spec.remote.cidr.external[0]: 169.254.0.0/16 refused (SpecialUse): is in 169.254.0.0/16 (link-local)"},
			{"metadata", []string{"169.254.169.254/32"}, nil, configuration.ReasonRefusedCIDR, "spec.remote.cidr.pod[0]: 169.254.169.254/32 refused (SpecialUse)"},
			{"loopback", []string{"127.0.0.0/8"}, nil, configuration.ReasonRefusedCIDR, "spec.remote.cidr.pod[0]: 127.0.0.0/8 refused (SpecialUse)"},
			{"multicast", []string{"10.246.0.0/16"}, []string{"224.0.0.0/4"}, configuration.ReasonRefusedCIDR, "spec.remote.cidr.external[0]: 224.0.0.0/4 refused (SpecialUse)"},
			{"default-route", []string{"0.0.0.0/0"}, nil, configuration.ReasonRefusedCIDR, "spec.remote.cidr.pod[0]: 0.0.0.0/0 refused (SpecialUse): a default route"},
			{"half", []string{"128.0.0.0/1"}, nil, configuration.ReasonRefusedCIDR, "holds 169.254.0.0/16 (link-local)"},
			{"public", []string{"10.246.0.0/16"}, []string{"8.8.8.0/24"}, configuration.ReasonRefusedCIDR, "spec.remote.cidr.external[0]: 8.8.8.0/24 refused (NotAllowed)"},
		} {
			e.create(t, newConf(ns, tc.name, tc.name, tc.pod, tc.external...))
			e.waitStalled(t, ns, tc.name, tc.reason, tc.msg)
		}
		// The good peer is untouched, and nothing was held for the
		// refused ones: the next colliding peer gets the first block.
		e.waitRemapped(t, ns, "good", []string{"10.245.0.0/16"})
		e.create(t, newConf(ns, "next", "next", []string{"10.244.0.0/16"}))
		e.waitRemapped(t, ns, "next", []string{"10.0.0.0/16"})
	})

	t.Run("a range holding a node address is remapped", func(t *testing.T) {
		e.create(t, newConf(ns, "nodes", "nodes", []string{"10.250.0.0/16"}))
		e.waitRemapped(t, ns, "nodes", []string{"10.1.0.0/16"})
	})

	t.Run("a node that comes later moves the range holding it", func(t *testing.T) {
		e.create(t, newConf(ns, "later", "later", []string{"10.251.0.0/16"}))
		e.waitRemapped(t, ns, "later", []string{"10.251.0.0/16"})
		e.createNode(t, "n2", "10.251.3.3", "")
		e.waitRemapped(t, ns, "later", []string{"10.2.0.0/16"})
		// The other peers keep their ranges.
		e.waitRemapped(t, ns, "good", []string{"10.245.0.0/16"})
		e.waitRemapped(t, ns, "nodes", []string{"10.1.0.0/16"})
	})

	t.Run("a range holding a gateway endpoint is remapped", func(t *testing.T) {
		// A server whose endpoint is not known yet reserves nothing.
		gws := &netv1beta1.GatewayServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server",
				Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: "good"}},
		}
		gws.Spec.MTU = 1340
		gws.Spec.Endpoint.Port = 51840
		gws.Spec.Endpoint.ServiceType = corev1.ServiceTypeNodePort
		if err := e.cluster.Client.Create(t.Context(), gws); err != nil {
			t.Fatal(err)
		}
		e.create(t, newConf(ns, "endpoint", "endpoint", []string{"10.252.0.0/16"}))
		e.waitRemapped(t, ns, "endpoint", []string{"10.252.0.0/16"})
		gwc := &netv1beta1.GatewayClient{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-endpoint",
				Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: "endpoint"}},
		}
		gwc.Spec.MTU = 1340
		gwc.Spec.Endpoint.Addresses = []string{"10.252.1.1"}
		gwc.Spec.Endpoint.Port = 51840
		if err := e.cluster.Client.Create(t.Context(), gwc); err != nil {
			t.Fatal(err)
		}
		e.waitRemapped(t, ns, "endpoint", []string{"10.3.0.0/16"})
	})

	t.Run("a range on a node's subnet is remapped", func(t *testing.T) {
		// It holds no node address, but the other half of n1's /24, where
		// the subnet's router or the next node may be.
		e.create(t, newConf(ns, "subnet", "subnet", []string{"10.246.0.0/16"}, "10.250.0.128/25"))
		e.waitRemapped(t, ns, "subnet", []string{"10.246.0.0/16"}, "10.4.0.0/25")
	})

	t.Run("a network a node's fabric publishes moves the range over it", func(t *testing.T) {
		// Far from every node address: routed as it is until n2's fabric
		// says n2 reaches 10.253.64.0/20 (another subnet of the VPC,
		// through a router); entries that do not parse are skipped.
		e.create(t, newConf(ns, "vpc", "vpc", []string{"10.253.0.0/16"}))
		e.waitRemapped(t, ns, "vpc", []string{"10.253.0.0/16"})
		var n corev1.Node
		if err := e.cluster.Client.Get(t.Context(), client.ObjectKey{Name: "n2"}, &n); err != nil {
			t.Fatal(err)
		}
		n.Annotations = map[string]string{clusterinfo.NodeSubnetsAnnotation: "not-a-network,10.253.64.0/20,fd00::/64"}
		if err := e.cluster.Client.Update(t.Context(), &n); err != nil {
			t.Fatal(err)
		}
		e.waitRemapped(t, ns, "vpc", []string{"10.5.0.0/16"})
		e.waitRemapped(t, ns, "good", []string{"10.245.0.0/16"})
	})
}

// createNode creates a Node with the given InternalIP and, unless empty,
// ExternalIP.
func (e *confEnv) createNode(t *testing.T, name, internal, external string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.cluster.Client.Create(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: internal}}
	if external != "" {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: external})
	}
	if err := e.cluster.Client.Status().Update(t.Context(), n); err != nil {
		t.Fatal(err)
	}
}
