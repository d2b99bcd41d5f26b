package agent

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// Options are the options both agents take, flag for flag. Their errors
// name fields (FieldError); a command maps them to its flags (WithFlags).
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

// FieldError is an option that cannot work, named by its field of the
// options (NodeIP, MTU): a command maps the field to its own flag.
type FieldError struct {
	// Field is the option's field; Value, when not empty, the value that
	// cannot work.
	Field, Value string
	Err          error
}

func (e *FieldError) Error() string {
	if e.Value != "" {
		return e.Field + " " + e.Value + ": " + e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Invalid returns the FieldError of field holding value (formatted with
// %v; empty: left out), with the message format and args.
func Invalid(field string, value any, format string, args ...any) error {
	v := fmt.Sprint(value)
	if value == nil {
		v = ""
	}
	return &FieldError{Field: field, Value: v, Err: fmt.Errorf(format, args...)}
}

// Required returns the error of an option an agent needs, "Name: required",
// unless set; when set, nil, which errors.Join leaves out.
func Required(field string, set bool) error {
	if set {
		return nil
	}
	return &FieldError{Field: field, Err: errors.New("required")}
}

// Check reports what in o cannot work, each error a FieldError; an agent
// adds what its own options need.
func (o Options) Check() []error {
	errs := []error{Required("Namespace", o.Namespace != "")}
	if o.NodeIP.IsValid() && !o.NodeIP.Is4() {
		errs = append(errs, Invalid("NodeIP", o.NodeIP, "must be an IPv4 address"))
	}
	if o.MTU < 0 {
		errs = append(errs, Invalid("MTU", o.MTU, "must not be negative"))
	}
	if o.ResyncInterval <= 0 {
		errs = append(errs, Invalid("ResyncInterval", o.ResyncInterval, "must be positive"))
	}
	return errs
}

// WithFlags rewrites err, a FieldError or errors joined of them, to name
// the flag flags gives for each field, as "--node-ip 1.2.3.4: ..."; other
// errors (a FieldError wrapped in one included), and fields without a flag,
// are kept as they are.
func WithFlags(err error, flags map[string]string) error {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range joined.Unwrap() {
			errs = append(errs, WithFlags(e, flags))
		}
		return errors.Join(errs...)
	}
	if fe, ok := err.(*FieldError); ok {
		if flag, ok := flags[fe.Field]; ok {
			return &FieldError{Field: flag, Value: fe.Value, Err: fe.Err}
		}
	}
	return err
}
