package kernel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/peerlink/peerlink/dataplane/nat"
	"github.com/peerlink/peerlink/dataplane/overlay"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/route"
)

// Stage is the network namespace the agent runs in, as the agent writes
// it. It is used by one goroutine.
type Stage struct {
	// Overlay is the encapsulation this kernel uses: the one asked for,
	// or the one Detect chose for Auto.
	Overlay plan.OverlayKind

	log    logr.Logger
	routes *route.Applier
	nat    *nat.Applier
}

// Open opens the appliers of the current network namespace and
// resolves the overlay encapsulation wanted.
func Open(wantOverlay plan.OverlayKind, log logr.Logger) (*Stage, error) {
	routes, err := route.NewApplier(netns.None())
	if err != nil {
		return nil, err
	}
	k := &Stage{log: log, routes: routes}
	if k.nat, err = nat.NewApplier(netns.None()); err != nil {
		k.Close()
		return nil, err
	}
	if k.Overlay, err = overlay.Detect(k.Handle(), wantOverlay); err != nil {
		k.Close()
		return nil, fmt.Errorf("choose the overlay encapsulation: %w", err)
	}
	return k, nil
}

// Handle is the netlink handle of the namespace, for the agent's own
// look-ups.
func (k *Stage) Handle() *netlink.Handle { return k.routes.Handle() }

// Close releases the netlink handle.
func (k *Stage) Close() { k.routes.Close() }

// Apply writes want into the namespace, each part compared with the kernel
// first and written only where it differs: first the tunnel, when there is
// one (a gateway's WireGuard link, which its routes name), then the overlay
// link, the routing and the nftables tables, ip then ip6 (an empty NAT6
// removes the ip6 table). tunnel reports whether it wrote. What changed is
// logged in one line.
func (k *Stage) Apply(want plan.NetNS, tunnel func() (bool, error)) error {
	var changes []string
	if tunnel != nil {
		wrote, err := tunnel()
		if err != nil {
			return err
		}
		if wrote {
			changes = append(changes, "wireguard configuration written")
		}
	}
	created, err := overlay.Ensure(k.Handle(), want.Overlay)
	if err != nil {
		return err
	}
	if created {
		changes = append(changes, "overlay link "+want.Overlay.Name+" created")
	}
	routed, err := k.routes.Apply(want.Routes)
	if err != nil {
		return err
	}
	changes = append(changes, routed...)
	if f := want.NAT.EffectiveFamily(); f != plan.IPv4 {
		return fmt.Errorf("nftables table %s of NAT: family %s, want %s", want.NAT.Table, f, plan.IPv4)
	}
	written, err := k.nat.Apply(want.NAT)
	if err != nil {
		return err
	}
	if written {
		changes = append(changes, "nftables table "+want.NAT.Table+" written")
	}
	nat6 := ip6Table(want)
	switch {
	case nat6.Empty():
		// Nothing is logged: most of the time there was no table either.
		if err := k.nat.Remove(nat6.Table, plan.IPv6); err != nil {
			return err
		}
	case nat6.EffectiveFamily() != plan.IPv6:
		// Written in the zero value's family, ip, it would replace NAT.
		return fmt.Errorf("nftables table %s of NAT6: family %s, want %s", nat6.Table, nat6.EffectiveFamily(), plan.IPv6)
	default:
		if written, err = k.nat.Apply(nat6); err != nil {
			return err
		}
		if written {
			changes = append(changes, "nftables table ip6 "+nat6.Table+" written")
		}
	}
	if len(changes) > 0 {
		k.log.Info("applied", "changes", strings.Join(changes, "; "))
	}
	return nil
}

// ip6Table is the ip6 table of n: NAT6, named as NAT when it names no
// table itself, so that a plan without IPv6 may leave NAT6 unset and still
// have a stale ip6 table removed.
func ip6Table(n plan.NetNS) plan.Ruleset {
	rs := n.NAT6
	if rs.Table == "" {
		rs.Table = n.NAT.Table
	}
	return rs
}

// Counters returns the packets counted so far in each named counter of
// the nftables table of family f.
func (k *Stage) Counters(table string, f plan.Family) (map[string]uint64, error) {
	return k.nat.Counters(table, f)
}

// Remove deletes what a plan that owns owned wrote: its nftables tables of
// both families, the routes of its tables and the rules at its priorities
// (putting the kernel's local-table rule back), and its overlay link. It
// goes on past an error and returns them all.
func (k *Stage) Remove(owned plan.NetNS) error {
	return errors.Join(
		k.nat.Remove(owned.NAT.Table, plan.IPv4),
		k.nat.Remove(ip6Table(owned).Table, plan.IPv6),
		k.routes.Remove(owned.Routes),
		overlay.Remove(k.Handle(), owned.Overlay.Name),
	)
}
