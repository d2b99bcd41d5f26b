package testbed

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/dataplane/fabric"
)

// ControllerNamespace holds the cluster-info ConfigMap.
const ControllerNamespace = "peerlink"

// Peering is one side's view of the peering, as the controller would have
// declared it in that side's API.
type Peering struct {
	// LocalID and PeerID are the cluster IDs of this side and of the peer.
	LocalID, PeerID string
	// Role of this side's gateway.
	Role gatewayrole.Role
	// Remapped are how this side sees the peer's PodCIDR and ExternalCIDR.
	RemappedPod, RemappedExternal netip.Prefix
	// RemappedPod6 is how this side sees the peer's IPv6 pod range,
	// PodCIDR6; invalid on IPv4-only sides, which have no IPv6 range.
	RemappedPod6 netip.Prefix
	// PrivateKey is this side's gateway key; PeerPublicKey the peer's.
	PrivateKey, PeerPublicKey wgtypes.Key
	// Server is where a client reaches the server.
	Server netip.AddrPort
	// NodeName and NodeIP are the node running the gateway pod.
	NodeName string
	NodeIP   netip.Addr
	// GatewayIP is the gateway pod's address; GatewayIP6 its IPv6 one on
	// dual-stack sides.
	GatewayIP, GatewayIP6 netip.Addr
}

// Namespace is the tenant namespace of the peer.
func (p Peering) Namespace() string { return netv1beta1.TenantNamespacePrefix + p.PeerID }

// dualStack tells whether the sides of the peering are dual-stack.
func (p Peering) dualStack() bool { return p.RemappedPod6.IsValid() }

// podCIDRs are the pod ranges of both sides: the IPv4 one, and on
// dual-stack sides the IPv6 one.
func (p Peering) podCIDRs() []netip.Prefix {
	if p.dualStack() {
		return []netip.Prefix{PodCIDR, PodCIDR6}
	}
	return []netip.Prefix{PodCIDR}
}

// remappedPods are the peer's pod ranges as this side sees them, in the
// order of podCIDRs.
func (p Peering) remappedPods() []netip.Prefix {
	if p.dualStack() {
		return []netip.Prefix{p.RemappedPod, p.RemappedPod6}
	}
	return []netip.Prefix{p.RemappedPod}
}

// localCIDRs are the gateway's --local-cidr: the pod ranges and the
// external range.
func (p Peering) localCIDRs() []string {
	var out []string
	for _, c := range append(p.podCIDRs(), ExternalCIDR) {
		out = append(out, c.String())
	}
	return out
}

// GatewayName is the name of the gateway object: the peer's ID.
func (p Peering) GatewayName() string { return p.PeerID }

// Install creates in c the objects of the peering, with the Configuration's
// remapped status and the gateway pod's addresses, and returns the gateway
// object's UID.
func Install(ctx context.Context, c client.Client, p Peering) (string, error) {
	ns := p.Namespace()
	labels := map[string]string{netv1beta1.RemoteClusterIDLabel: p.PeerID}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ControllerNamespace}},
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: clusterinfo.Name, Namespace: ControllerNamespace},
			Data: clusterinfo.Info{
				ClusterID:    p.LocalID,
				PodCIDRs:     p.podCIDRs(),
				ExternalCIDR: ExternalCIDR,
				InternalCIDR: netip.MustParsePrefix("10.80.0.0/16"),
			}.Data(),
		},
		&netv1beta1.PublicKey{
			ObjectMeta: metav1.ObjectMeta{Name: p.PeerID, Namespace: ns, Labels: map[string]string{
				netv1beta1.RemoteClusterIDLabel: p.PeerID, netv1beta1.GatewayResourceLabel: "true",
			}},
			Spec: netv1beta1.PublicKeySpec{PublicKey: p.PeerPublicKey[:]},
		},
	}
	var gateway client.Object
	if p.Role == gatewayrole.Server {
		gateway = &netv1beta1.GatewayServer{
			ObjectMeta: metav1.ObjectMeta{Name: p.GatewayName(), Namespace: ns, Labels: labels},
			Spec: netv1beta1.GatewayServerSpec{
				MTU:      netv1beta1.DefaultMTU,
				Endpoint: netv1beta1.Endpoint{Port: int32(p.Server.Port()), ServiceType: corev1.ServiceTypeNodePort},
			},
		}
	} else {
		gateway = &netv1beta1.GatewayClient{
			ObjectMeta: metav1.ObjectMeta{Name: p.GatewayName(), Namespace: ns, Labels: labels},
			Spec: netv1beta1.GatewayClientSpec{
				MTU:      netv1beta1.DefaultMTU,
				Endpoint: netv1beta1.GatewayClientEndpoint{Addresses: []string{p.Server.Addr().String()}, Port: int32(p.Server.Port())},
			},
		}
	}
	objs = append(objs, gateway)
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}

	conf := &netv1beta1.Configuration{
		ObjectMeta: metav1.ObjectMeta{Name: p.PeerID, Namespace: ns, Labels: labels},
		Spec: netv1beta1.ConfigurationSpec{Remote: netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{
			Pod: netv1beta1.CIDRsOf(p.podCIDRs()), External: []netv1beta1.CIDR{netv1beta1.CIDR(ExternalCIDR.String())},
		}}},
	}
	if err := c.Create(ctx, conf); err != nil {
		return "", fmt.Errorf("create Configuration %s: %w", conf.Name, err)
	}
	conf.Status.Remote = &netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{
		Pod: netv1beta1.CIDRsOf(p.remappedPods()), External: []netv1beta1.CIDR{netv1beta1.CIDR(p.RemappedExternal.String())},
	}}
	if err := c.Status().Update(ctx, conf); err != nil {
		return "", fmt.Errorf("set status of Configuration %s: %w", conf.Name, err)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: netv1beta1.GatewayObjectPrefix + p.GatewayName() + "-0", Namespace: ns, Labels: map[string]string{
			fabric.GatewayAppLabel:            fabric.GatewayAppValue,
			netv1beta1.ActiveGatewayLabel:     "true",
			netv1beta1.RemoteClusterIDLabel:   p.PeerID,
			"networking.liqo.io/gateway-name": p.GatewayName(),
		}},
		Spec: corev1.PodSpec{
			NodeName:   p.NodeName,
			Containers: []corev1.Container{{Name: "gateway", Image: "ghcr.io/peerlink/peerlink-agent:latest"}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		return "", fmt.Errorf("create Pod %s: %w", pod.Name, err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p.GatewayIP.String(), HostIP: p.NodeIP.String(),
		PodIPs: []corev1.PodIP{{IP: p.GatewayIP.String()}}}
	if p.dualStack() {
		// A dual-stack pod's addresses, the primary one first, as a
		// kubelet reports them.
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: p.GatewayIP6.String()})
	}
	if err := c.Status().Update(ctx, pod); err != nil {
		return "", fmt.Errorf("set status of Pod %s: %w", pod.Name, err)
	}
	// What the controller publishes of the active pod, which the fabric
	// follows.
	ip, node := netv1beta1.IP(p.GatewayIP.String()), p.NodeName
	internal := &netv1beta1.InternalGatewayEndpoint{IP: &ip, Node: &node}
	switch g := gateway.(type) {
	case *netv1beta1.GatewayServer:
		g.Status.InternalEndpoint = internal
	case *netv1beta1.GatewayClient:
		g.Status.InternalEndpoint = internal
	}
	if err := c.Status().Update(ctx, gateway); err != nil {
		return "", fmt.Errorf("set status of %s %s: %w", gateway.GetObjectKind().GroupVersionKind().Kind, gateway.GetName(), err)
	}
	if p.dualStack() {
		if err := installNodes(ctx, c, p); err != nil {
			return "", err
		}
	}
	return string(gateway.GetUID()), nil
}

// installNodes creates the Nodes of a dual-stack side with their pod ranges
// of both families, as a dual-stack cluster's nodes have them: the fabric
// then routes what the gateway returns to the second node's pod through
// the overlay to that node, IPv6 by an IPv4 next hop, rather than leaving
// it to the first node's own routes. The first node's ranges hold only the
// gateway pod's addresses: the second node's fabric routes none of them.
func installNodes(ctx context.Context, c client.Client, p Peering) error {
	for _, n := range []struct {
		name string
		ip   netip.Addr
		pods []netip.Prefix
	}{
		{p.NodeName, p.NodeIP, []netip.Prefix{netip.PrefixFrom(p.GatewayIP, 24).Masked(), netip.PrefixFrom(p.GatewayIP6, 64).Masked()}},
		{p.NodeName + "-2", Node2IP, []netip.Prefix{netip.PrefixFrom(FarPodIP, 24).Masked(), netip.PrefixFrom(FarPodIP6, 64).Masked()}},
	} {
		var cidrs []string
		for _, c := range n.pods {
			cidrs = append(cidrs, c.String())
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}, Spec: corev1.NodeSpec{PodCIDR: cidrs[0], PodCIDRs: cidrs}}
		if err := c.Create(ctx, node); err != nil {
			return fmt.Errorf("create Node %s: %w", n.name, err)
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip.String()}}
		if err := c.Status().Update(ctx, node); err != nil {
			return fmt.Errorf("set status of Node %s: %w", n.name, err)
		}
	}
	return nil
}

// WriteKeys writes the files of a mounted key Secret into dir.
func WriteKeys(dir string, private wgtypes.Key) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	pub := private.PublicKey()
	if err := os.WriteFile(filepath.Join(dir, netv1beta1.PrivateKeyField), private[:], 0o400); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, netv1beta1.PublicKeyField), pub[:], 0o444)
}
