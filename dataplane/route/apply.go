package route

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// ErrLinkMissing reports that a link the state refers to does not exist;
// the link's owner has to create it before the state can be applied.
var ErrLinkMissing = errors.New("link missing")

// Applier writes a plan.Routing into one network namespace.
type Applier struct {
	h   *netlink.Handle
	ns  netns.NsHandle
	cur netns.NsHandle
	// encaps remembers the encapsulation last written for each route:
	// the netlink library does not decode it when listing routes, so a
	// route the kernel has is trusted to carry the encapsulation this
	// applier gave it, and rewritten once after a restart.
	encaps map[routeKey]ipEncap
	// families are the address families the applier writes: IPv4 and
	// IPv6, or IPv4 alone on a kernel booted without IPv6, so that a
	// routing of IPv4 still applies there.
	families []int
}

type routeKey struct {
	table int
	dst   netip.Prefix
}

// NewApplier returns an applier for the namespace ns, or for the current one
// when ns is netns.None().
func NewApplier(ns netns.NsHandle) (*Applier, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("open netlink handle: %w", err)
	}
	a := &Applier{h: h, ns: ns, cur: netns.None(), encaps: map[routeKey]ipEncap{}, families: []int{netlink.FAMILY_V4, netlink.FAMILY_V6}}
	if _, err := h.RuleList(netlink.FAMILY_V6); errors.Is(err, unix.EAFNOSUPPORT) {
		a.families = a.families[:1]
	}
	if ns.IsOpen() {
		// Sockets for raw requests are opened in ns from a thread that then
		// returns to the namespace the process started in.
		cur, err := netns.Get()
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("get current network namespace: %w", err)
		}
		a.cur = cur
	}
	return a, nil
}

// Close releases the applier's netlink handle.
func (a *Applier) Close() {
	a.h.Close()
	if a.cur.IsOpen() {
		a.cur.Close()
	}
}

// Handle is the applier's netlink handle, for callers that subscribe to
// changes or create links in the same namespace.
func (a *Applier) Handle() *netlink.Handle { return a.h }

// Apply brings the namespace to want and returns a description of each
// change it made; nothing is written when the kernel already matches.
func (a *Applier) Apply(want plan.Routing) ([]string, error) {
	if err := want.Validate(); err != nil {
		return nil, fmt.Errorf("routing: %w", err)
	}
	var changes []string
	note := func(format string, args ...any) { changes = append(changes, fmt.Sprintf(format, args...)) }
	hops := nextHops(want)
	ipv6 := carriesIPv6(want)

	links := map[string]netlink.Link{}
	link := func(name string) (netlink.Link, error) {
		if l, ok := links[name]; ok {
			return l, nil
		}
		l, err := a.h.LinkByName(name)
		if err != nil {
			if errors.As(err, new(netlink.LinkNotFoundError)) {
				return nil, fmt.Errorf("link %s: %w", name, ErrLinkMissing)
			}
			return nil, fmt.Errorf("look up link %s: %w", name, err)
		}
		links[name] = l
		return l, nil
	}

	for _, l := range want.Links {
		nl, err := link(l.Name)
		if err != nil {
			return changes, err
		}
		if l.MTU != 0 && nl.Attrs().MTU != l.MTU {
			if err := a.h.LinkSetMTU(nl, l.MTU); err != nil {
				return changes, fmt.Errorf("set MTU of link %s to %d: %w", l.Name, l.MTU, err)
			}
			note("link %s: mtu %d", l.Name, l.MTU)
		}
		if nl.Attrs().Flags&net.FlagUp == 0 {
			if err := a.h.LinkSetUp(nl); err != nil {
				return changes, fmt.Errorf("set link %s up: %w", l.Name, err)
			}
			note("link %s: up", l.Name)
		}
		if want := devconf(l); len(want) > 0 {
			conf, err := a.inetConf(nl.Attrs().Index)
			if err != nil {
				return changes, fmt.Errorf("read IPv4 settings of link %s: %w", l.Name, err)
			}
			diff := map[int]uint32{}
			for k, v := range want {
				if k > len(conf) || conf[k-1] != v {
					diff[k] = v
				}
			}
			if len(diff) > 0 {
				if err := a.setInetConf(nl.Attrs().Index, diff); err != nil {
					return changes, fmt.Errorf("write IPv4 settings of link %s: %w", l.Name, err)
				}
				if l.Router {
					note("link %s: forwarding on, rp_filter and redirects off", l.Name)
				}
				if l.AcceptLocal {
					note("link %s: accept_local on", l.Name)
				}
			}
		}
		if l.Router && ipv6 {
			changed, err := a.forward6(l.Name)
			if err != nil {
				return changes, fmt.Errorf("turn on IPv6 forwarding of link %s: %w", l.Name, err)
			}
			if changed {
				note("link %s: IPv6 forwarding on", l.Name)
			}
		}
	}

	neighbors := slices.Clone(want.Neighbors)
	for _, n := range hops {
		neighbors = append(neighbors, n)
	}
	// In a stable order, so that the changes read alike from run to run.
	slices.SortStableFunc(neighbors[len(want.Neighbors):], func(x, y plan.Neighbor) int { return x.IP.Compare(y.IP) })

	for _, l := range want.Links {
		nl, err := link(l.Name)
		if err != nil {
			return changes, err
		}
		c, err := a.syncAddresses(nl, want.Addresses)
		changes = append(changes, c...)
		if err != nil {
			return changes, err
		}
		c, err = a.syncNeighbors(nl, neighbors)
		changes = append(changes, c...)
		if err != nil {
			return changes, err
		}
	}

	c, err := a.syncRoutes(want, link, hops)
	changes = append(changes, c...)
	if err != nil {
		return changes, err
	}
	c, err = a.syncRules(want)
	changes = append(changes, c...)
	if err != nil {
		return changes, err
	}
	for _, family := range a.families {
		c, err = a.syncLocalRule(family, want.LocalExceptIIF)
		changes = append(changes, c...)
		if err != nil {
			return changes, err
		}
	}
	return changes, nil
}

// familyOf is the netlink address family of a.
func familyOf(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// ruleFamilies are the families a rule is installed in: a rule matching a
// source in that source's, a rule without address in both.
func (a *Applier) ruleFamilies(r plan.PolicyRule) []int {
	if r.Src.IsValid() {
		return []int{familyOf(r.Src.Addr())}
	}
	return a.families
}

// tag starts the description of a change of a rule of family, as ip(8)
// names the family: IPv4 is implied, IPv6 is named.
func tag(family int) string {
	if family == netlink.FAMILY_V6 {
		return "ipv6 "
	}
	return ""
}

// carriesIPv6 reports whether want routes any IPv6: IPv6 forwarding is
// written only then, so that a namespace that carries only IPv4 needs no
// IPv6 setting (a pod's /proc/sys cannot be written, and IPv6 may be off).
func carriesIPv6(want plan.Routing) bool {
	return slices.ContainsFunc(want.Addresses, func(a plan.Address) bool { return a.Prefix.Addr().Is6() }) ||
		slices.ContainsFunc(want.Neighbors, func(n plan.Neighbor) bool { return n.IP.Is6() }) ||
		slices.ContainsFunc(want.Routes, func(r plan.Route) bool { return !r.DeadEnd() && r.Dst.Addr().Is6() })
}

// localRule is the kernel's rule that looks up the local table; with iif
// set, the rule that replaces it and skips packets arriving on iif.
func localRule(family int, iif string) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = family
	r.Priority = 0
	r.Table = unix.RT_TABLE_LOCAL
	if iif != "" {
		r.IifName = iif
		r.Invert = true
	}
	return r
}

// localRules finds, among the rules at priority 0 that look up the local
// table, the kernel's own and the one skipping iif.
func (a *Applier) localRules(family int, iif string) (plain, except bool, err error) {
	have, err := a.h.RuleList(family)
	if err != nil {
		return false, false, fmt.Errorf("list %srules: %w", tag(family), err)
	}
	for _, h := range have {
		if h.Priority != 0 || h.Table != unix.RT_TABLE_LOCAL || h.Src != nil || h.Dst != nil || h.OifName != "" || h.Mark != 0 {
			continue
		}
		switch {
		case h.IifName == "" && !h.Invert:
			plain = true
		case h.IifName == iif && h.Invert:
			except = true
		}
	}
	return plain, except, nil
}

// syncLocalRule replaces the kernel's local-table rule of family with one
// that skips packets arriving on iif. The replacement is added before the
// original goes, so that local delivery never stops. A deletion that names
// no link removes the first priority-0 local rule, which may be the
// replacement when an interrupted run left them in the other order: hence
// the loop.
func (a *Applier) syncLocalRule(family int, iif string) ([]string, error) {
	if iif == "" {
		return nil, nil
	}
	var changes []string
	for range 3 {
		plain, except, err := a.localRules(family, iif)
		if err != nil {
			return changes, err
		}
		if !except {
			if err := a.h.RuleAdd(localRule(family, iif)); err != nil {
				return changes, fmt.Errorf("add %srule 0: not iif %s lookup local: %w", tag(family), iif, err)
			}
			changes = append(changes, fmt.Sprintf("%srule 0: not from all iif %s lookup local: added", tag(family), iif))
			continue
		}
		if !plain {
			return changes, nil
		}
		if err := a.h.RuleDel(localRule(family, "")); err != nil {
			return changes, fmt.Errorf("delete %srule 0: from all lookup local: %w", tag(family), err)
		}
		changes = append(changes, tag(family)+"rule 0: from all lookup local: deleted")
	}
	return changes, fmt.Errorf("%srule 0: the local table rule does not settle to skipping iif %s", tag(family), iif)
}

// restoreLocalRule puts the kernel's local-table rule of family back in
// place of the one skipping iif, adding it before the replacement goes.
func (a *Applier) restoreLocalRule(family int, iif string) error {
	plain, except, err := a.localRules(family, iif)
	if err != nil {
		return err
	}
	if !plain {
		if err := a.h.RuleAdd(localRule(family, "")); err != nil {
			return fmt.Errorf("add %srule 0: from all lookup local: %w", tag(family), err)
		}
	}
	if except {
		// Naming the link matches only the replacement.
		if err := a.h.RuleDel(localRule(family, iif)); err != nil {
			return fmt.Errorf("delete %srule 0: not iif %s lookup local: %w", tag(family), iif, err)
		}
	}
	return nil
}

func (a *Applier) syncAddresses(l netlink.Link, want []plan.Address) ([]string, error) {
	var changes []string
	name := l.Attrs().Name
	have, err := a.h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses of link %s: %w", name, err)
	}
	wanted := map[netip.Prefix]bool{}
	for _, w := range want {
		if w.Link == name {
			wanted[w.Prefix] = true
		}
	}
	for _, h := range have {
		p, ok := prefixOf(h.IPNet)
		if ok && wanted[p] {
			delete(wanted, p)
			continue
		}
		if ok && p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
			// The kernel's own IPv6 link-local address, which neighbor
			// discovery needs; peerlink never plans one.
			continue
		}
		if err := a.h.AddrDel(l, &h); err != nil {
			return changes, fmt.Errorf("delete address %s of link %s: %w", h.IPNet, name, err)
		}
		changes = append(changes, fmt.Sprintf("address %s dev %s: deleted", h.IPNet, name))
	}
	for _, w := range want {
		if w.Link != name || !wanted[w.Prefix] {
			continue
		}
		addr := &netlink.Addr{IPNet: ipNet(w.Prefix)}
		if w.Prefix.Addr().Is6() {
			// Usable at once: duplicate address detection would hold it
			// tentative, unusable as a source, for a second or more.
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := a.h.AddrAdd(l, addr); err != nil {
			return changes, fmt.Errorf("add address %s to link %s: %w", w.Prefix, name, err)
		}
		changes = append(changes, fmt.Sprintf("address %s: added", w))
	}
	return changes, nil
}

func (a *Applier) syncNeighbors(l netlink.Link, want []plan.Neighbor) ([]string, error) {
	var changes []string
	name, index := l.Attrs().Name, l.Attrs().Index
	haveByIP := map[netip.Addr]netlink.Neigh{}
	for _, family := range a.families {
		have, err := a.h.NeighList(index, family)
		if err != nil {
			return nil, fmt.Errorf("list %sneighbors of link %s: %w", tag(family), name, err)
		}
		for _, n := range have {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				if family == netlink.FAMILY_V4 {
					ip = ip.Unmap()
				}
				haveByIP[ip] = n
			}
		}
	}
	wanted := map[netip.Addr]bool{}
	for _, w := range want {
		if w.Link != name {
			continue
		}
		wanted[w.IP] = true
		if n, ok := haveByIP[w.IP]; ok && n.State == netlink.NUD_PERMANENT && bytes.Equal(n.HardwareAddr, w.MAC) {
			continue
		}
		err := a.h.NeighSet(&netlink.Neigh{
			LinkIndex:    index,
			Family:       familyOf(w.IP),
			State:        netlink.NUD_PERMANENT,
			IP:           w.IP.AsSlice(),
			HardwareAddr: w.MAC,
		})
		if err != nil {
			return changes, fmt.Errorf("set neighbor %s: %w", w, err)
		}
		changes = append(changes, fmt.Sprintf("neighbor %s: set", w))
	}
	for ip, n := range haveByIP {
		if wanted[ip] || n.State != netlink.NUD_PERMANENT {
			continue
		}
		if err := a.h.NeighDel(&n); err != nil {
			return changes, fmt.Errorf("delete neighbor %s of link %s: %w", ip, name, err)
		}
		changes = append(changes, fmt.Sprintf("neighbor %s dev %s: deleted", ip, name))
	}
	return changes, nil
}

func (a *Applier) syncRoutes(want plan.Routing, link func(string) (netlink.Link, error), hops map[onLink]plan.Neighbor) ([]string, error) {
	var changes []string
	byTable := map[int][]plan.Route{}
	for _, r := range want.Routes {
		byTable[r.Table] = append(byTable[r.Table], r)
	}
	for _, table := range want.Tables {
		have, err := a.listTable(table)
		if err != nil {
			return changes, err
		}
		wanted := map[netip.Prefix]bool{}
		for _, r := range byTable[table] {
			wanted[r.Dst] = true
			nr, err := toNetlinkRoute(r, link, hops)
			if err != nil {
				return changes, err
			}
			key := routeKey{table, r.Dst}
			if h, ok := have[r.Dst]; ok && sameRoute(h, nr) && a.sameEncap(key, nr) {
				continue
			}
			if err := a.h.RouteReplace(nr); err != nil {
				return changes, fmt.Errorf("write route %s: %w", r, err)
			}
			if e, ok := nr.Encap.(*ipEncap); ok {
				a.encaps[key] = *e
			} else {
				delete(a.encaps, key)
			}
			changes = append(changes, fmt.Sprintf("route %s: written", r))
		}
		for dst, h := range have {
			if wanted[dst] {
				continue
			}
			if err := a.h.RouteDel(&h); err != nil {
				return changes, fmt.Errorf("delete route %s from table %d: %w", dst, table, err)
			}
			delete(a.encaps, routeKey{table, dst})
			changes = append(changes, fmt.Sprintf("route %s table %d: deleted", dst, table))
		}
	}
	return changes, nil
}

// listTable returns the routes of both families in table, by destination.
func (a *Applier) listTable(table int) (map[netip.Prefix]netlink.Route, error) {
	out := map[netip.Prefix]netlink.Route{}
	for _, family := range a.families {
		routes, err := a.h.RouteListFiltered(family, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, fmt.Errorf("list %sroutes of table %d: %w", tag(family), table, err)
		}
		for _, r := range routes {
			dst := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
			if family == netlink.FAMILY_V6 {
				dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
			}
			if r.Dst != nil {
				p, ok := prefixOf(r.Dst)
				if !ok {
					continue
				}
				dst = p
			}
			out[dst] = r
		}
	}
	return out, nil
}

// toNetlinkRoute is the kernel's form of r; an IPv6 route's next hop is
// the link-local address hops gives for it (see nexthop.go).
func toNetlinkRoute(r plan.Route, link func(string) (netlink.Link, error), hops map[onLink]plan.Neighbor) (*netlink.Route, error) {
	nr := &netlink.Route{Table: r.Table, Dst: ipNet(r.Dst), Family: familyOf(r.Dst.Addr())}
	switch {
	case r.Unreachable:
		nr.Type = unix.RTN_UNREACHABLE
		return nr, nil
	case r.Blackhole:
		nr.Type = unix.RTN_BLACKHOLE
		return nr, nil
	}
	nr.Type = unix.RTN_UNICAST
	l, err := link(r.Link)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", r, err)
	}
	nr.LinkIndex = l.Attrs().Index
	nr.Scope = netlink.SCOPE_LINK
	switch {
	case linkLocalHop(r) && r.Dst.Addr().Is4():
		// An IPv4 route through an IPv6 next hop names it in RTA_VIA.
		nr.Via = &netlink.Via{AddrFamily: netlink.FAMILY_V6, Addr: hops[onLink{r.Link, r.Via}].IP.AsSlice()}
		nr.Scope = netlink.SCOPE_UNIVERSE
	case linkLocalHop(r):
		// A link-local next hop is on-link by definition.
		nr.Gw = hops[onLink{r.Link, r.Via}].IP.AsSlice()
		nr.Scope = netlink.SCOPE_UNIVERSE
	case r.Via.IsValid():
		nr.Gw = r.Via.AsSlice()
		nr.Flags = int(netlink.FLAG_ONLINK)
		nr.Scope = netlink.SCOPE_UNIVERSE
	}
	if r.Encap.IsValid() {
		nr.Encap = &ipEncap{id: uint64(r.VNI), dst: r.Encap}
	}
	return nr, nil
}

func sameRoute(have netlink.Route, want *netlink.Route) bool {
	if have.Type != want.Type {
		return false
	}
	if want.Type == unix.RTN_UNREACHABLE || want.Type == unix.RTN_BLACKHOLE {
		return true
	}
	sameVia := have.Via == nil && want.Via == nil || have.Via != nil && want.Via != nil && have.Via.Equal(want.Via)
	return have.LinkIndex == want.LinkIndex && have.Gw.Equal(want.Gw) && sameVia
}

func (a *Applier) sameEncap(key routeKey, want *netlink.Route) bool {
	last, ok := a.encaps[key]
	e, wantEncap := want.Encap.(*ipEncap)
	if !wantEncap {
		return !ok
	}
	return ok && last == *e
}

func (a *Applier) syncRules(want plan.Routing) ([]string, error) {
	var changes []string
	for _, family := range a.families {
		c, err := a.syncFamilyRules(family, want)
		changes = append(changes, c...)
		if err != nil {
			return changes, err
		}
	}
	return changes, nil
}

// syncFamilyRules brings the rules of family at the owned priorities to
// those of want that belong to family.
func (a *Applier) syncFamilyRules(family int, want plan.Routing) ([]string, error) {
	var changes []string
	have, err := a.h.RuleList(family)
	if err != nil {
		return nil, fmt.Errorf("list %srules: %w", tag(family), err)
	}
	var rules []plan.PolicyRule
	for _, w := range want.Rules {
		if slices.Contains(a.ruleFamilies(w), family) {
			rules = append(rules, w)
		}
	}
	matched := make([]bool, len(rules))
	for _, h := range have {
		if !slices.Contains(want.RulePriorities, h.Priority) {
			continue
		}
		i := slices.IndexFunc(rules, func(w plan.PolicyRule) bool { return sameRule(h, w) })
		if i >= 0 && !matched[i] {
			matched[i] = true
			continue
		}
		if err := a.delRule(family, h); err != nil {
			return changes, err
		}
		changes = append(changes, fmt.Sprintf("%srule %s: deleted", tag(family), h))
	}
	for i, w := range rules {
		if matched[i] {
			continue
		}
		r := netlink.NewRule()
		r.Family = family
		r.Priority = w.Priority
		r.Table = w.Table
		r.IifName = w.IIF
		if w.Src.IsValid() {
			r.Src = ipNet(w.Src)
		}
		if err := a.h.RuleAdd(r); err != nil {
			return changes, fmt.Errorf("add %srule %s: %w", tag(family), w, err)
		}
		changes = append(changes, fmt.Sprintf("%srule %s: added", tag(family), w))
	}
	return changes, nil
}

// delRule deletes a rule the kernel listed in family; the listing does not
// fill in the family, which the deletion needs when the rule has no
// address.
func (a *Applier) delRule(family int, h netlink.Rule) error {
	h.Family = family
	if err := a.h.RuleDel(&h); err != nil {
		return fmt.Errorf("delete %srule %d lookup %d: %w", tag(family), h.Priority, h.Table, err)
	}
	return nil
}

func sameRule(h netlink.Rule, w plan.PolicyRule) bool {
	if h.Priority != w.Priority || h.Table != w.Table || h.IifName != w.IIF || h.OifName != "" || h.Invert {
		return false
	}
	if h.Mark != 0 || h.Dst != nil {
		return false
	}
	if !w.Src.IsValid() {
		return h.Src == nil
	}
	p, ok := prefixOf(h.Src)
	return ok && p == w.Src
}

// Remove deletes every route of the owned tables and every rule at the
// owned priorities of s, in both families, and restores the kernel's
// local-table rules when s replaced them. Addresses and neighbors go with the links, which their
// owners delete.
func (a *Applier) Remove(s plan.Routing) error {
	var errs []error
	for _, family := range a.families {
		if s.LocalExceptIIF != "" {
			if err := a.restoreLocalRule(family, s.LocalExceptIIF); err != nil {
				errs = append(errs, err)
			}
		}
		have, err := a.h.RuleList(family)
		if err != nil {
			errs = append(errs, fmt.Errorf("list %srules: %w", tag(family), err))
		}
		for _, h := range have {
			if slices.Contains(s.RulePriorities, h.Priority) {
				if err := a.delRule(family, h); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, table := range s.Tables {
		routes, err := a.listTable(table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for dst, r := range routes {
			if err := a.h.RouteDel(&r); err != nil {
				errs = append(errs, fmt.Errorf("delete route %s from table %d: %w", dst, table, err))
			}
		}
	}
	clear(a.encaps)
	return errors.Join(errs...)
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := n.Mask.Size()
	addr = addr.Unmap()
	if addr.Is4() && bits > 32 {
		bits -= 96
	}
	return netip.PrefixFrom(addr, bits), true
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
