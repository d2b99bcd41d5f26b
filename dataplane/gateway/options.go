package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/wireguard"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/mcs"
)

// Options configure the agent; the command line sets them. Of the options
// both agents take, Namespace is the gateway object's, NodeIP is where
// traffic from the tunnel is sent through the overlay (invalid: that
// traffic follows the pod's own routes), and MTU is the tunnel's (0: the
// gateway object's spec.mtu).
type Options struct {
	dataplane.AgentOptions
	// Name of the GatewayServer or GatewayClient.
	Name string
	// RemoteClusterID is the peer's cluster ID: the label value that finds
	// its PublicKey and Configuration.
	RemoteClusterID string
	// Role is the gateway's side.
	Role gatewayrole.Role
	// GatewayUID is the UID of the gateway object, for the Connection's
	// gatewayRef and owner reference.
	GatewayUID types.UID
	// ListenPort is the server's WireGuard port.
	ListenPort int
	// EndpointAddresses and EndpointPort are where a client finds the
	// server; empty addresses are read from the GatewayClient.
	EndpointAddresses []string
	EndpointPort      int
	// KeyDir holds the files privateKey and publicKey of the key Secret.
	KeyDir string
	// Keepalive is the WireGuard persistent keepalive.
	Keepalive time.Duration
	// PingInterval is the interval of the health pings.
	PingInterval time.Duration
	// MaxMisses is the number of unanswered pings in a row that mean Error.
	MaxMisses int
	// WireGuard chooses the WireGuard back-end.
	WireGuard wireguard.Implementation
	// LocalRanges are this cluster's pod and external CIDRs: the only
	// destinations the ingress filter lets out of the tunnel.
	LocalRanges []netip.Prefix
	// UnknownSource is this cluster's unknown-source address, the first of
	// its external CIDR: packets of the nodes themselves leave the gateway
	// as it. Invalid: they are not translated (and the peer drops them).
	UnknownSource netip.Addr
	// ServiceLimits bound what the peer may export to this cluster, as the
	// controller holds it to them; zero fields take mcs.DefaultLimits.
	ServiceLimits mcs.Limits
	// KeySwitchTimeout, KeySwitchRetry and KeyGrace time a key rotation;
	// zero: DefaultKeySwitchTimeout, DefaultKeySwitchRetry and
	// DefaultKeyGrace.
	KeySwitchTimeout, KeySwitchRetry, KeyGrace time.Duration
}

func (o Options) keySwitchTimeout() time.Duration {
	return cmp.Or(o.KeySwitchTimeout, DefaultKeySwitchTimeout)
}
func (o Options) keySwitchRetry() time.Duration {
	return cmp.Or(o.KeySwitchRetry, DefaultKeySwitchRetry)
}
func (o Options) keyGrace() time.Duration { return cmp.Or(o.KeyGrace, DefaultKeyGrace) }

// Validate reports options that cannot work, each error a field.Error
// (field.WithFlags names the flags).
func (o Options) Validate() error {
	errs := []error{field.Required("Name", o.Name != ""), field.Required("RemoteClusterID", o.RemoteClusterID != "")}
	if !o.Role.Valid() {
		errs = append(errs, field.Invalid("Role", strconv.Quote(string(o.Role)), "must be server or client"))
	}
	if o.Role == gatewayrole.Server && (o.ListenPort < 1 || o.ListenPort > 65535) {
		errs = append(errs, field.Invalid("ListenPort", o.ListenPort, "a server needs a port in 1-65535"))
	}
	if o.EndpointPort < 0 || o.EndpointPort > 65535 {
		errs = append(errs, field.Invalid("EndpointPort", o.EndpointPort, "must be in 1-65535"))
	}
	errs = append(errs, field.Required("KeyDir", o.KeyDir != ""))
	if o.Keepalive < 0 {
		errs = append(errs, field.Invalid("Keepalive", o.Keepalive, "must not be negative"))
	}
	if o.PingInterval <= 0 {
		errs = append(errs, field.Invalid("PingInterval", o.PingInterval, "must be positive"))
	}
	if o.KeySwitchTimeout < 0 || o.KeySwitchRetry < 0 || o.KeyGrace < 0 {
		errs = append(errs, fmt.Errorf("key rotation timing %v, %v, %v: must not be negative", o.KeySwitchTimeout, o.KeySwitchRetry, o.KeyGrace))
	}
	if o.MaxMisses < 1 {
		errs = append(errs, fmt.Errorf("max misses %d: must be at least 1", o.MaxMisses))
	}
	if len(o.LocalRanges) == 0 {
		// Without them the ingress filter would have to let everything in.
		errs = append(errs, field.Invalid("LocalRanges", nil, "required (this cluster's pod and external CIDRs; the controller sets %s)", netv1beta1.LocalCIDRsEnv))
	}
	for _, p := range o.LocalRanges {
		if !p.IsValid() || p != p.Masked() {
			errs = append(errs, field.Invalid("LocalRanges", p, "must be a network"))
		}
	}
	if u := o.UnknownSource; u.IsValid() && !slices.ContainsFunc(o.LocalRanges, func(p netip.Prefix) bool { return p.Contains(u) }) {
		errs = append(errs, field.Invalid("UnknownSource", u, "must be an address of LocalRanges"))
	}
	return errors.Join(append(errs, o.AgentOptions.Check()...)...)
}
