package reconciler

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/reconciler/configuration"
)

// TestConfigurationIPv6 checks what the controller makes of a peer's IPv6
// ranges on a dual-stack cluster: each is remapped within its own family,
// independently of the peer's IPv4 ranges, away from this cluster's IPv6
// ranges (a node's pod range and address, the service range, a gateway
// endpoint) into fd00::/8, the default IPv6 pool; a free one inside the
// plan is kept; the hostile ones are refused naming the range and the rule.
func TestConfigurationIPv6(t *testing.T) {
	e := newConfEnv(t, "peerlink", "peers")
	// The IPv6 service range, given as a reserved range, and a plan that
	// holds the ULA ranges the test keeps. The pools are the defaults.
	e.facts.ReservedCIDRs = cidr.MustPrefixes("fd96:1::/112")
	e.facts.RoutedPeer = append(e.facts.RoutedPeer, cidr.MustPrefixes("fd44::/16", "fd30::/16")...)
	// A dual-stack node: its IPv6 pod range (not in the facts, which carry
	// the IPv4 family) and its IPv6 address are this cluster's.
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24", "fd44:1::/64"}}}
	if err := e.cluster.Client.Create(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.250.0.5"},
		{Type: corev1.NodeInternalIP, Address: "fd30:0:1::2"},
	}
	if err := e.cluster.Client.Status().Update(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	e.run(t)
	const ns = "peers"

	t.Run("dual-stack remote", func(t *testing.T) {
		// Both pod ranges collide with ours; the external IPv6 range is
		// free and in the plan, the external IPv4 one collides.
		e.create(t, newConf(ns, "dual", "dual", []string{"10.244.0.0/16", "fd44:1::/48"}, "10.70.0.0/16", "fd44:2::/64"))
		c := e.waitRemapped(t, ns, "dual", []string{"10.0.0.0/16", "fd00::/48"}, "10.1.0.0/16", "fd44:2::/64")
		if a, err := c.RemappedAddr(netip.MustParseAddr("fd44:1::7")); err != nil || a.String() != "fd00::7" {
			t.Errorf("RemappedAddr(fd44:1::7) = %v, %v; want fd00::7", a, err)
		}
	})

	t.Run("IPv6-only remote", func(t *testing.T) {
		// The same pod range as the first peer, and an external range on
		// our service range: both remapped, past the first peer's range.
		e.create(t, newConf(ns, "v6", "v6", []string{"fd44:1::/48"}, "fd96:1::/112"))
		e.waitRemapped(t, ns, "v6", []string{"fd00:0:1::/48"}, "fd00:0:2::/112")
		// The other peer keeps its ranges.
		e.waitRemapped(t, ns, "dual", []string{"10.0.0.0/16", "fd00::/48"}, "10.1.0.0/16", "fd44:2::/64")
	})

	t.Run("IPv6 ranges holding a node address or a gateway endpoint are remapped", func(t *testing.T) {
		// The /64 of n1's IPv6 address.
		e.create(t, newConf(ns, "node6", "node6", []string{"fd30:0:1::/56"}))
		e.waitRemapped(t, ns, "node6", []string{"fd00:0:2:100::/56"})
		// Free until a GatewayClient names an address in it.
		e.create(t, newConf(ns, "endpoint6", "endpoint6", []string{"fd30:0:2::/48"}))
		e.waitRemapped(t, ns, "endpoint6", []string{"fd30:0:2::/48"})
		gwc := &netv1beta1.GatewayClient{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-endpoint6",
				Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: "endpoint6"}},
		}
		gwc.Spec.MTU = 1340
		gwc.Spec.Endpoint.Addresses = []string{"fd30:0:2::1"}
		gwc.Spec.Endpoint.Port = 51840
		if err := e.cluster.Client.Create(t.Context(), gwc); err != nil {
			t.Fatal(err)
		}
		e.waitRemapped(t, ns, "endpoint6", []string{"fd00:0:3::/48"})
	})

	t.Run("hostile IPv6 ranges stall their Configuration only", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			pod      []string
			external []string
			msg      string
		}{
			{"loopback6", []string{"::1/128"}, nil, "spec.remote.cidr.pod[0]: ::1/128 refused (SpecialUse): is in ::1/128 (loopback)"},
			{"link-local6", []string{"10.246.0.0/16", "fe80::/64"}, nil, "spec.remote.cidr.pod[1]: fe80::/64 refused (SpecialUse): is in fe80::/10 (link-local)"},
			{"multicast6", []string{"fd44:5::/48"}, []string{"ff02::/16"}, "spec.remote.cidr.external[0]: ff02::/16 refused (SpecialUse): is in ff00::/8 (multicast)"},
			{"nat64", []string{"64:ff9b::/96"}, nil, "spec.remote.cidr.pod[0]: 64:ff9b::/96 refused (SpecialUse): is in 64:ff9b::/96 (NAT64 (well-known prefix))"},
			{"default6", []string{"::/0"}, nil, "spec.remote.cidr.pod[0]: ::/0 refused (SpecialUse): a default route holds ::/128 (unspecified)"},
			{"gua", []string{"10.247.0.0/16", "2a01:4f8::/32"}, nil, "spec.remote.cidr.pod[1]: 2a01:4f8::/32 refused (NotAllowed): outside the allowed peer ranges 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"},
		} {
			e.create(t, newConf(ns, tc.name, tc.name, tc.pod, tc.external...))
			e.waitStalled(t, ns, tc.name, configuration.ReasonRefusedCIDR, tc.msg)
		}
		// Nothing was held for them, in either family: the next colliding
		// peer gets the next free blocks.
		e.create(t, newConf(ns, "next", "next", []string{"10.244.0.0/16", "fd44:1::/48"}))
		e.waitRemapped(t, ns, "next", []string{"10.2.0.0/16", "fd00:0:4::/48"})
	})

	t.Run("the IPv6 pool running out stalls the Configuration", func(t *testing.T) {
		// fc00::/7 is allowed, but no /7 fits in fd00::/8.
		e.create(t, newConf(ns, "huge", "huge", []string{"10.248.0.0/16", "fc00::/7"}))
		e.waitStalled(t, ns, "huge", configuration.ReasonPoolExhausted,
			"allocate for fc00::/7: no free block of that length in the pools (IPv6 pools: fd00::/8)")
	})
}
