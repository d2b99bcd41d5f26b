package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/peerlink/peerlink/api/gatewayrole"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/kernel"
	"github.com/peerlink/peerlink/dataplane/overlay"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/wireguard"
)

// podNetwork is the pod's network namespace as the agent writes it: the
// kernel stage, the WireGuard link, and what the kernel reports back (the
// ingress filter's drops, the device's peer). It is used by the goroutine
// of Start.
type podNetwork struct {
	role    gatewayrole.Role
	log     logr.Logger
	metrics *metrics
	conn    *connectionWriter
	kernel  *kernel.Stage
	tunnel  *wireguard.Link
	// overlay are the overlay facts found at start.
	overlay dataplane.GatewayOverlay
	// applied is the last plan applied; nil before the first.
	applied *dataplane.GatewayPlan
	// peerEndpoint is the server's last known endpoint of the client,
	// written into a device that was created anew.
	peerEndpoint netip.AddrPort
}

// openPodNetwork opens the kernel stage in the current network namespace,
// which picks the overlay kind, and finds the pod's own address. A server
// records its client's endpoint on conn.
func openPodNetwork(opts Options, conn *connectionWriter, m *metrics, log logr.Logger) (*podNetwork, error) {
	k, err := kernel.Open(opts.Overlay, log)
	if err != nil {
		return nil, err
	}
	n := &podNetwork{role: opts.Role, log: log, metrics: m, conn: conn, kernel: k,
		tunnel: wireguard.NewLink(dataplane.TunnelLink, dataplane.LegacyTunnelLink, opts.WireGuard, log)}
	kind := k.Overlay
	addr, mtu, err := podUnderlay(k.Handle())
	if err != nil {
		k.Close()
		return nil, err
	}
	n.overlay = dataplane.GatewayOverlay{Kind: kind, Address: addr, Node: opts.NodeIP, MTU: mtu - overlay.Overhead}
	log.Info("overlay", "kind", kind, "port", kind.Port(), "podAddress", addr, "mtu", n.overlay.MTU, "node", opts.NodeIP)
	if !opts.NodeIP.IsValid() {
		log.Info("no node address (--node-ip or NODE_IP): traffic from the tunnel follows the pod's own routes instead of the overlay")
	}
	return n, nil
}

// podUnderlay returns the pod's address and the MTU of its link: those of
// the link of the IPv4 default route, or of the IPv6 one in a pod without
// IPv4 (an IPv6-only cluster). The overlay runs over that family, whichever
// families it carries.
func podUnderlay(h *netlink.Handle) (netip.Addr, int, error) {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := h.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return netip.Addr{}, 0, fmt.Errorf("list routes of the main table: %w", err)
		}
		for _, r := range routes {
			if ones, _ := r.Dst.Mask.Size(); r.Dst != nil && ones != 0 {
				continue
			}
			link, err := h.LinkByIndex(r.LinkIndex)
			if err != nil {
				return netip.Addr{}, 0, fmt.Errorf("look up the link of the default route: %w", err)
			}
			addrs, err := h.AddrList(link, family)
			if err != nil {
				return netip.Addr{}, 0, fmt.Errorf("list addresses of %s: %w", link.Attrs().Name, err)
			}
			for _, ad := range addrs {
				if ip, ok := netip.AddrFromSlice(ad.IP); ok && ip.Unmap().IsGlobalUnicast() {
					return ip.Unmap(), link.Attrs().MTU, nil
				}
			}
			return netip.Addr{}, 0, fmt.Errorf("link %s of the default route has no global address", link.Attrs().Name)
		}
	}
	return netip.Addr{}, 0, errors.New("the pod has no default route: cannot tell its own address")
}

// apply writes the plan, the tunnel first, each part compared with the
// kernel first, and reads back what the metrics show.
func (n *podNetwork) apply(p dataplane.GatewayPlan) error {
	tunnel := func() (bool, error) {
		dev, err := n.tunnel.Ensure(p.TunnelMTU)
		if err != nil {
			return false, err
		}
		return wireguard.Sync(dev, n.withKnownEndpoint(dev, p.WireGuard))
	}
	if err := n.kernel.Apply(p.NetNS, tunnel); err != nil {
		return err
	}
	// The ingress filter counts in each family's table; a metric counts
	// the drops of both.
	if drops, err := n.drops(p); err == nil {
		n.metrics.observeDrops(drops)
	} else {
		n.log.Error(err, "read the ingress filter's counters")
	}
	if dev, err := n.tunnel.Device().Device(); err == nil {
		peer := wireguard.FindPeer(dev, p.WireGuard.Peer.PublicKey)
		n.metrics.observe(n.tunnel.Device().Implementation(), peer)
		n.rememberEndpoint(peer)
	}
	n.applied = &p
	return nil
}

// drops reads the ingress filter's counters of the tables of p, both
// families' added up.
func (n *podNetwork) drops(p dataplane.GatewayPlan) (map[string]uint64, error) {
	drops := map[string]uint64{}
	for _, rs := range []plan.Ruleset{p.NAT, p.NAT6} {
		if rs.Empty() {
			continue
		}
		counts, err := n.kernel.Counters(rs.Table, rs.Family)
		if err != nil {
			return nil, fmt.Errorf("table %s %s: %w", rs.Family, rs.Table, err)
		}
		for reason, c := range counts {
			drops[reason] += c
		}
	}
	return drops, nil
}

// withKnownEndpoint gives a server's device that knows no endpoint for its
// client (it was just created) the last one known, so that it starts the
// handshake at once. An endpoint the device reports is never replaced: the
// client may have roamed.
func (n *podNetwork) withKnownEndpoint(dev wireguard.Device, cfg plan.WireGuard) plan.WireGuard {
	if n.role != gatewayrole.Server || !n.peerEndpoint.IsValid() {
		return cfg
	}
	cur, err := dev.Device()
	if err != nil {
		return cfg
	}
	if p := wireguard.FindPeer(cur, cfg.Peer.PublicKey); p != nil && p.Endpoint != nil {
		return cfg
	}
	cfg.Peer.Endpoint = n.peerEndpoint
	return cfg
}

// restoreEndpoint takes, on a server, the client's last endpoint from the
// Connection, as this replica's last run or the former active replica
// recorded it, so that a new device starts the handshake itself.
func (n *podNetwork) restoreEndpoint(ctx context.Context) {
	if n.role != gatewayrole.Server {
		return
	}
	ep, err := n.conn.lastEndpoint(ctx)
	if err != nil {
		n.log.Error(err, "read the client's last endpoint")
		return
	}
	if ep.IsValid() {
		n.peerEndpoint = ep
	}
}

// rememberEndpoint keeps a server's view of its client's endpoint, in
// memory and on the Connection for the next run.
func (n *podNetwork) rememberEndpoint(peer *wgtypes.Peer) {
	if n.role != gatewayrole.Server || peer == nil || peer.Endpoint == nil {
		return
	}
	ep := peer.Endpoint.AddrPort()
	ep = netip.AddrPortFrom(ep.Addr().Unmap(), ep.Port())
	if ep == n.peerEndpoint {
		return
	}
	n.peerEndpoint = ep
	// A write that fails is retried with the next change; the endpoint in
	// memory serves until then.
	ctx, cancel := context.WithTimeout(context.Background(), connectionWriteTimeout)
	defer cancel()
	if err := n.conn.persistEndpoint(ctx, ep); err != nil {
		n.log.Error(err, "record the client's endpoint on the Connection")
	}
}

// cleanup removes what the agent created: the nftables table, the routes
// and rules, the overlay link and the tunnel link.
func (n *podNetwork) cleanup() {
	if err := errors.Join(n.kernel.Remove(dataplane.GatewayOwned()), n.tunnel.Close()); err != nil {
		n.log.Error(err, "clean up")
		return
	}
	n.log.Info("removed the tunnel, overlay link, routes, rules and nftables table")
}
