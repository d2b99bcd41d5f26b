package dataplane

import (
	"fmt"
	"strings"

	"github.com/peerlink/peerlink/dataplane/overlay"
	"github.com/peerlink/peerlink/dataplane/route"
)

// String renders the plan for people: the golden files of the planner and
// `peerlink render` show it. The private key is shown as its public key.
func (p GatewayPlan) String() string {
	var b strings.Builder
	wg := p.WireGuard
	fmt.Fprintf(&b, "# wireguard %s (mtu %d)\n", TunnelLink, p.TunnelMTU)
	fmt.Fprintf(&b, "public key: %s\n", wg.PrivateKey.PublicKey())
	if wg.ListenPort != 0 {
		fmt.Fprintf(&b, "listen port: %d\n", wg.ListenPort)
	} else {
		b.WriteString("listen port: (any)\n")
	}
	fmt.Fprintf(&b, "peer: %s\n", wg.Peer.PublicKey)
	if wg.Peer.Endpoint.IsValid() {
		fmt.Fprintf(&b, "  endpoint: %s\n", wg.Peer.Endpoint)
	} else {
		b.WriteString("  endpoint: (as learned from the peer)\n")
	}
	var allowed []string
	for _, a := range wg.Peer.AllowedIPs {
		allowed = append(allowed, a.String())
	}
	fmt.Fprintf(&b, "  allowed ips: %s\n", strings.Join(allowed, ", "))
	fmt.Fprintf(&b, "  persistent keepalive: %s\n", wg.Peer.PersistentKeepalive)
	fmt.Fprintf(&b, "\n# overlay\nlink %s kind %s port %d underlay %s mac %s\n", p.Overlay.Name, p.Overlay.Kind, p.Overlay.Kind.Port(), p.Overlay.Underlay, overlay.MAC(p.Overlay.Underlay))
	writeRoutes(&b, p.Routes)
	fmt.Fprintf(&b, "\n# nftables\n%s", p.NAT)
	return b.String()
}

// String renders the plan for people, as GatewayPlan.String does.
func (p FabricPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# overlay\nlink %s kind %s port %d underlay %s mac %s\n", p.Overlay.Name, p.Overlay.Kind, p.Overlay.Kind.Port(), p.Overlay.Underlay, overlay.MAC(p.Overlay.Underlay))
	writeRoutes(&b, p.Routes)
	fmt.Fprintf(&b, "\n# nftables\n%s", p.NAT)
	if len(p.Skipped) > 0 {
		b.WriteString("\n# skipped gateways\n")
		for _, s := range p.Skipped {
			fmt.Fprintf(&b, "%s: %s\n", s.Name, strings.ReplaceAll(s.Reason, "\n", "; "))
		}
	}
	return b.String()
}

func writeRoutes(b *strings.Builder, s route.State) {
	b.WriteString("\n# links\n")
	for _, l := range s.Links {
		fmt.Fprintln(b, l)
	}
	if len(s.Addresses) > 0 {
		b.WriteString("\n# addresses\n")
		for _, a := range s.Addresses {
			fmt.Fprintln(b, a)
		}
	}
	if len(s.Neighbors) > 0 {
		b.WriteString("\n# neighbors\n")
		for _, n := range s.Neighbors {
			fmt.Fprintln(b, n)
		}
	}
	fmt.Fprintf(b, "\n# routes (tables %v)\n", s.Tables)
	for _, r := range s.Routes {
		fmt.Fprintln(b, r)
	}
	fmt.Fprintf(b, "\n# rules (priorities %v)\n", s.RulePriorities)
	if s.LocalExceptIIF != "" {
		fmt.Fprintf(b, "0: not from all iif %s lookup local (replaces 0: from all lookup local)\n", s.LocalExceptIIF)
	}
	for _, r := range s.Rules {
		fmt.Fprintln(b, r)
	}
}
