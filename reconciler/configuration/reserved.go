package configuration

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/ipam"
)

// A peer's range that holds one of this cluster's node addresses or gateway
// endpoints must never be routed as it is: every node would send that
// address into the tunnel, handing the peer a node (or looping the overlay
// and the tunnel's own underlay). These addresses change while the
// controller runs, so the reconciler holds them in its allocator beside the
// local ranges, rebases the ledger when they change, and reconciles the
// Configurations whose ranges hold a new one: those get a remapped range.

// allocator returns an allocator over the pools and the address plan for
// peers (--routed-peer-cidr) that takes the local ranges and reserved.
func (r *Reconciler) allocator(reserved []netip.Prefix) (*ipam.Allocator, error) {
	alloc, err := ipam.NewPlanned(ipam.PoolsOrDefault(r.Options.Pools), r.Options.RoutedPeer, append(slices.Clip(r.Options.Taken), reserved...))
	if err != nil {
		return nil, fmt.Errorf("ipam of the local facts: %w", err)
	}
	return alloc, nil
}

// listReserved returns, sorted and without duplicates, the addresses of
// this cluster that a peer range must not hold, in both families: the
// subnets and pod ranges of every Node (reservedNodeAddresses), the server
// addresses GatewayClients connect to and the addresses GatewayServers are
// reached at. Host names are left out.
func (r *Reconciler) listReserved(ctx context.Context) ([]netip.Prefix, error) {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("list nodes for their addresses: %w", err)
	}
	var clients netv1beta1.GatewayClientList
	if err := r.Client.List(ctx, &clients); err != nil {
		return nil, fmt.Errorf("list gateway clients for their endpoints: %w", err)
	}
	var servers netv1beta1.GatewayServerList
	if err := r.Client.List(ctx, &servers); err != nil {
		return nil, fmt.Errorf("list gateway servers for their endpoints: %w", err)
	}
	var out []netip.Prefix
	for i := range nodes.Items {
		out = append(out, reservedNodeAddresses(&nodes.Items[i])...)
	}
	for i := range clients.Items {
		out = append(out, endpointAddresses(clients.Items[i].Spec.Endpoint.Addresses)...)
	}
	for i := range servers.Items {
		out = append(out, serverAddresses(&servers.Items[i])...)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return cmp.Or(a.Addr().Compare(b.Addr()), a.Bits()-b.Bits()) })
	return slices.Compact(out), nil
}

// refreshReserved rebases the ledger when the reserved addresses changed
// since it last looked. The Configurations that lose a range to a new
// address are reconciled through the watches (holdingReserved); each of them
// gets a new range when its turn comes.
func (r *Reconciler) refreshReserved(ctx context.Context) error {
	reserved, err := r.listReserved(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Equal(reserved, r.reserved) {
		return nil
	}
	alloc, err := r.allocator(reserved)
	if err != nil {
		return err
	}
	lost := r.ledger.Rebase(alloc)
	r.reserved = reserved
	if len(lost) > 0 {
		ctrl.LoggerFrom(ctx).Info("ranges hold a node address or gateway endpoint now; they get new ones",
			"configurations", lost)
	}
	return nil
}

// nodeSubnetBits is the length of the subnet reserved around each node
// address. The API does not say which subnet a node's address is on; its
// neighbours (the other nodes, the subnet's router, a cloud's resolver at
// the subnet's base) are reached on-link or through the default route, and
// a /24 is the smallest subnet clouds and on-premises networks commonly give
// nodes. The fabric agent of each node publishes the node's real subnets
// and routed networks; the /24 holds before it does, and on a node without
// it.
const nodeSubnetBits = 24

// nodeSubnetBits6 is the IPv6 counterpart of nodeSubnetBits: an IPv6
// subnet is a /64 (RFC 4291 interface identifiers are 64 bits), whatever
// hands out the node's address.
const nodeSubnetBits6 = 64

// reservedNodeAddresses returns the subnets of a node: the /24 holding
// each of its IPv4 InternalIP and ExternalIP addresses and the /64 holding
// each IPv6 one, the networks its fabric agent publishes it reaches
// (clusterinfo.NodeSubnets), and its pod ranges (spec.podCIDRs). The pod
// ranges are in the local facts when they are IPv4; an IPv6 one may not be
// (the facts detect the IPv4 family), and the node names it either way.
func reservedNodeAddresses(n *corev1.Node) []netip.Prefix {
	out := clusterinfo.NodeSubnets(n)
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		bits := nodeSubnetBits
		if ip = ip.Unmap(); ip.Is6() {
			bits = nodeSubnetBits6
		}
		out = append(out, netip.PrefixFrom(ip.WithZone(""), bits).Masked())
	}
	for _, s := range n.Spec.PodCIDRs {
		if p, err := cidr.ParseNetwork(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// endpointAddresses returns the addresses among a gateway endpoint's
// addresses, IPv4 and IPv6, each as a prefix of its one address; host
// names are skipped.
func endpointAddresses(addrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range addrs {
		if ip, err := netip.ParseAddr(s); err == nil {
			ip = ip.Unmap().WithZone("")
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	return out
}

// serverAddresses returns the addresses a GatewayServer is reached at, as
// prefixes of one address; none while its endpoint is not known.
func serverAddresses(s *netv1beta1.GatewayServer) []netip.Prefix {
	if s.Status.Endpoint == nil {
		return nil
	}
	return endpointAddresses(s.Status.Endpoint.Addresses)
}

// reservedOf returns the reserved addresses an object brings: a Node's
// addresses or a gateway's endpoint addresses.
func reservedOf(o client.Object) []netip.Prefix {
	switch o := o.(type) {
	case *corev1.Node:
		return reservedNodeAddresses(o)
	case *netv1beta1.GatewayClient:
		return endpointAddresses(o.Spec.Endpoint.Addresses)
	case *netv1beta1.GatewayServer:
		return serverAddresses(o)
	}
	return nil
}

// holdingReserved maps a Node or gateway to the Configurations whose
// assigned ranges hold one of its addresses: they must move.
func (r *Reconciler) holdingReserved(ctx context.Context, o client.Object) []reconcile.Request {
	addrs := reservedOf(o)
	if len(addrs) == 0 {
		return nil
	}
	var list netv1beta1.ConfigurationList
	if err := r.Client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list configurations holding a reserved address")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		c := &list.Items[i]
		if c.Status.Remote != nil && holdsAny(c.Status.Remote.CIDR, addrs) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}

// holdsAny reports whether a range of c holds one of addrs.
func holdsAny(c netv1beta1.ClusterConfigCIDR, addrs []netip.Prefix) bool {
	for _, s := range slices.Concat(c.Pod, c.External) {
		p, err := cidr.ParseNetwork(string(s))
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p.Overlaps(a) {
				return true
			}
		}
	}
	return false
}

// nodeAddressesChanged lets through the Node events that may bring a new
// address: creations, and updates that change the addresses, the pod
// ranges or the published subnets. Nodes update
// their status every few seconds; those updates are not worth a reconcile.
// A deleted node's address frees nothing: ranges stay where they are.
func nodeAddressesChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Node)
			n, ok2 := e.ObjectNew.(*corev1.Node)
			return !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses) ||
				!slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) ||
				o.Annotations[clusterinfo.NodeSubnetsAnnotation] != n.Annotations[clusterinfo.NodeSubnetsAnnotation]
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
}
