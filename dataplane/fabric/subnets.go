package fabric

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// A peer's range routed as it is over a network this node reaches through
// a router or on its link (another subnet of the VPC, a peered network, an
// on-premises one) would take that network's traffic from every pod and
// node into the tunnel. The controller sees only the Nodes' addresses; the
// agent, which sees the node's routing table, tells it the rest.

// nodeSubnets reads from the main routing table of h the IPv4 networks
// this node reaches other than through its default route: its on-link
// prefixes and the destinations of its other unicast routes. Left out are
// the routes of the overlay link, the link-local, loopback and multicast
// ones, and those inside own (this cluster's pod, service, external and
// internal ranges, which are never a peer's anyway). The result is
// summarised (clusterinfo.SummariseNodeSubnets).
func nodeSubnets(h *netlink.Handle, own []netip.Prefix) ([]netip.Prefix, error) {
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list the routes of the main table: %w", err)
	}
	overlayIndex := -1
	if l, err := h.LinkByName(dataplane.OverlayLink); err == nil {
		overlayIndex = l.Attrs().Index
	}
	return subnetsOf(routes, overlayIndex, own), nil
}

// subnetsOf is the pure part of nodeSubnets.
func subnetsOf(routes []netlink.Route, overlayIndex int, own []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range routes {
		if r.Dst == nil || r.Type != unix.RTN_UNICAST || r.LinkIndex == overlayIndex && overlayIndex >= 0 {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		ip, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok || ones == 0 {
			continue
		}
		p := netip.PrefixFrom(ip.Unmap(), ones).Masked()
		a := p.Addr()
		if !a.Is4() || a.IsLinkLocalUnicast() || a.IsLoopback() || a.IsMulticast() {
			continue
		}
		if slices.ContainsFunc(own, func(o netip.Prefix) bool { return o.Bits() <= p.Bits() && o.Contains(a) }) {
			continue
		}
		out = append(out, p)
	}
	return clusterinfo.SummariseNodeSubnets(out)
}

// publishSubnets writes this node's subnets (nodeSubnets) on its Node when
// they differ from what the Node carries; none removes the annotation.
func (a *Agent) publishSubnets(ctx context.Context) error {
	info, err := clusterinfo.Read(ctx, a.client, a.opts.Namespace)
	if err != nil {
		return err
	}
	subnets, err := nodeSubnets(a.kernel.Handle(), info.Ranges())
	if err != nil {
		return err
	}
	want := rangepolicy.Format(subnets)
	var node corev1.Node
	if err := a.client.Get(ctx, client.ObjectKey{Name: a.opts.NodeName}, &node); err != nil {
		return fmt.Errorf("get node %s: %w", a.opts.NodeName, err)
	}
	if node.Annotations[clusterinfo.NodeSubnetsAnnotation] == want {
		return nil
	}
	var value any = want
	if want == "" {
		value = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{clusterinfo.NodeSubnetsAnnotation: value}}})
	if err != nil {
		return err
	}
	if err := a.client.Patch(ctx, &node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("publish the subnets of node %s: %w", a.opts.NodeName, err)
	}
	a.log.Info("published the node's subnets", "subnets", want)
	return nil
}
