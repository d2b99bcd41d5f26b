package field

import (
	"errors"
	"fmt"
)

// Error is an option that cannot work, named by its field of the options
// (NodeIP, MTU, PodCIDRs): a command maps the field to its own flag.
type Error struct {
	// Field is the option's field; Value, when not empty, the value that
	// cannot work.
	Field, Value string
	// Err says what is wrong; an Error itself when the value conflicts
	// with another field's (Conflict).
	Err error
	// Relation, in the Error of the other field of a conflict, says how
	// the two conflict ("overlaps").
	Relation string
}

func (e *Error) Error() string {
	s := e.Field
	if e.Relation != "" {
		s = e.Relation + " " + s
	}
	if e.Value != "" {
		s += " " + e.Value
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// New returns the Error of field holding value (empty: left out), err
// saying what is wrong.
func New(field, value string, err error) error {
	return &Error{Field: field, Value: value, Err: err}
}

// Invalid returns the Error of field holding value (formatted with
// %v; empty: left out), with the message format and args.
func Invalid(field string, value any, format string, args ...any) error {
	v := fmt.Sprint(value)
	if value == nil {
		v = ""
	}
	return &Error{Field: field, Value: v, Err: fmt.Errorf(format, args...)}
}

// Required returns the error of an option that is needed, "Name: required",
// unless set; when set, nil, which errors.Join leaves out.
func Required(field string, set bool) error {
	if set {
		return nil
	}
	return &Error{Field: field, Err: errors.New("required")}
}

// Conflict returns the Error of field holding value, which cannot go with
// other holding otherValue, as "A a: overlaps B b: why", relation being
// "overlaps".
func Conflict(field string, value any, relation, other string, otherValue any, why string) error {
	return &Error{Field: field, Value: fmt.Sprint(value),
		Err: &Error{Field: other, Value: fmt.Sprint(otherValue), Relation: relation, Err: errors.New(why)}}
}

// WithFlags rewrites err, an Error or errors joined of them, to name
// the flag flags gives for each field, as "--node-ip 1.2.3.4: ..."; other
// errors (an Error wrapped in one included), and fields without a flag,
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
	fe, ok := err.(*Error)
	if !ok {
		return err
	}
	out := *fe
	if flag, ok := flags[fe.Field]; ok {
		out.Field = flag
	}
	if inner, ok := fe.Err.(*Error); ok {
		out.Err = WithFlags(inner, flags)
	}
	return &out
}
