package gateway

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	"github.com/peerlink/peerlink/dataplane"
)

// ipsReadTimeout bounds the read of the IP objects: a gateway that may
// not read them (its controller has not granted it yet) keeps the hosts it
// read last rather than hold up its tunnel.
const ipsReadTimeout = 2 * time.Second

// remappedHosts reads the IP objects of every namespace and returns the
// hosts the gateway translates: each IP the controller gave an address of
// the external range, whose local address lies outside the local ranges.
// Of two IPs with one address the older wins; past MaxIPs, the lowest
// addresses. The objects are this cluster's admin's: a peer creates none.
func (r *factReader) remappedHosts(ctx context.Context, local []netip.Prefix, unknown netip.Addr) []dataplane.IPMapping {
	ctx, cancel := context.WithTimeout(ctx, ipsReadTimeout)
	defer cancel()
	var list ipamv1alpha1.IPList
	if err := r.client.List(ctx, &list); err != nil {
		r.log.Info("keeping the remapped hosts read last", "reason", fmt.Sprintf("list IPs: %v", err), "hosts", len(r.hosts))
		return r.hosts
	}
	r.hosts = IPMappings(list.Items, local, unknown)
	return r.hosts
}

// IPMappings returns the hosts of ips a gateway of a cluster with the local
// ranges and the unknown-source address translates, in the order of their
// remapped addresses, at most dataplane.MaxIPs: those whose status.ip is an
// address of the external range (the local range holding the unknown
// source) other than the unknown source and whose spec.ip is an IPv4
// address outside the local ranges. Of two with one remapped address, the
// older (then by namespace and name) is kept.
func IPMappings(ips []ipamv1alpha1.IP, local []netip.Prefix, unknown netip.Addr) []dataplane.IPMapping {
	i := slices.IndexFunc(local, func(p netip.Prefix) bool { return unknown.IsValid() && p.Contains(unknown) })
	if i < 0 {
		return nil
	}
	ext := local[i]
	sorted := slices.Clone(ips)
	slices.SortFunc(sorted, func(a, b ipamv1alpha1.IP) int {
		return cmp.Or(a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
			strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	seen := map[netip.Addr]bool{}
	var out []dataplane.IPMapping
	for _, ip := range sorted {
		l, lerr := netip.ParseAddr(string(ip.Spec.IP))
		r, rerr := netip.ParseAddr(string(ip.Status.IP))
		if lerr != nil || rerr != nil || !l.Is4() || !r.Is4() || !ext.Contains(r) || r == unknown || seen[r] ||
			slices.ContainsFunc(local, func(p netip.Prefix) bool { return p.Contains(l) }) {
			continue
		}
		seen[r] = true
		out = append(out, dataplane.IPMapping{Local: l, Remapped: r})
	}
	slices.SortFunc(out, func(a, b dataplane.IPMapping) int { return a.Remapped.Compare(b.Remapped) })
	if len(out) > dataplane.MaxIPs {
		out = out[:dataplane.MaxIPs]
	}
	return out
}
