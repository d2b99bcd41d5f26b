package agent

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// Options are the options both agents take, flag for flag.
type Options struct {
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

// Required returns the error of a flag an agent needs, "--name: required",
// unless set; when set, nil, which errors.Join leaves out.
func Required(flag string, set bool) error {
	if set {
		return nil
	}
	return fmt.Errorf("%s: required", flag)
}

// Check reports what in o cannot work, each error naming its flag; an agent
// adds what its own options need.
func (o Options) Check() []error {
	errs := []error{Required("--namespace", o.Namespace != "")}
	if o.NodeIP.IsValid() && !o.NodeIP.Is4() {
		errs = append(errs, fmt.Errorf("--node-ip %s: must be an IPv4 address", o.NodeIP))
	}
	if o.MTU < 0 {
		errs = append(errs, fmt.Errorf("--mtu %d: must not be negative", o.MTU))
	}
	if o.ResyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("--resync-interval %v: must be positive", o.ResyncInterval))
	}
	return errs
}
