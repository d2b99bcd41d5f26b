package dataplane

import (
	"fmt"
	"strings"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// String renders the plan for people: the golden files of the planner show
// it. The private key is shown as its public key.
func (p GatewayPlan) String() string {
	var b strings.Builder
	wg := p.WireGuard
	fmt.Fprintf(&b, "# wireguard %s (mtu %d)\n", TunnelLink, p.TunnelMTU)
	fmt.Fprintf(&b, "public key: %s\n", wg.PrivateKey.PublicKey())
	if wg.NextPrivateKey != (plan.Key{}) {
		fmt.Fprintf(&b, "next public key: %s (once the peer accepts it)\n", wg.NextPrivateKey.PublicKey())
	}
	if wg.ListenPort != 0 {
		fmt.Fprintf(&b, "listen port: %d\n", wg.ListenPort)
	} else {
		b.WriteString("listen port: (any)\n")
	}
	fmt.Fprintf(&b, "peer: %s\n", wg.Peer.PublicKey)
	if wg.Peer.NextPublicKey != (plan.Key{}) {
		fmt.Fprintf(&b, "  next key: %s (accepted; holds the allowed ips once the peer starts a session with it)\n", wg.Peer.NextPublicKey)
	}
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
	fmt.Fprintf(&b, "\n%s", p.NetNS)
	return b.String()
}

// String renders the plan for people, as GatewayPlan.String does.
func (p FabricPlan) String() string {
	var b strings.Builder
	b.WriteString(p.NetNS.String())
	if len(p.Skipped) > 0 {
		b.WriteString("\n# skipped gateways\n")
		for _, s := range p.Skipped {
			fmt.Fprintf(&b, "%s: %s\n", s.Name, strings.ReplaceAll(s.Reason, "\n", "; "))
		}
	}
	return b.String()
}
