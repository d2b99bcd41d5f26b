package dataplane

import (
	"net/netip"
	"time"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/internal/field"
)

// AgentOptions are the options both agents take, flag for flag. Their errors
// name fields (field.Error); a command maps them to its flags
// (field.WithFlags).
type AgentOptions struct {
	// Namespace holds the object the agent starts from: the cluster-info
	// ConfigMap for the fabric, the gateway object for a gateway.
	Namespace string
	// NodeIP is the address of the node the agent runs on, where overlay
	// packets for that node arrive.
	NodeIP netip.Addr
	// Overlay chooses the encapsulation; the fabric and the gateways must
	// agree.
	Overlay plan.OverlayKind
	// MTU of the link the agent makes, the fabric's overlay link or a
	// gateway's tunnel; 0 derives it.
	MTU int
	// ResyncInterval is how often the kernel is compared with the plan
	// even when nothing was notified.
	ResyncInterval time.Duration
}

// Check reports what in o cannot work, each error a field.Error; an agent
// adds what its own options need.
func (o AgentOptions) Check() []error {
	errs := []error{field.Required("Namespace", o.Namespace != "")}
	if o.MTU < 0 {
		errs = append(errs, field.Invalid("MTU", o.MTU, "must not be negative"))
	}
	if o.ResyncInterval <= 0 {
		errs = append(errs, field.Invalid("ResyncInterval", o.ResyncInterval, "must be positive"))
	}
	return errs
}
