package fielderr

import "errors"

// Error is a setting that cannot work, named by its field.
type Error struct {
	// Field names the setting; Value, when not empty, is the value that
	// cannot work.
	Field, Value string
	Err          error
}

// New returns the Error of field holding value (empty: left out).
func New(field, value string, err error) error {
	return &Error{Field: field, Value: value, Err: err}
}

func (e *Error) Error() string {
	if e.Value != "" {
		return e.Field + " " + e.Value + ": " + e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// WithNames rewrites err, an *Error or errors joined of them, to name the
// field by names[Field], as "--cluster-info facts.yaml: ..."; other errors,
// an *Error wrapped in one included, and fields without a name are kept as
// they are.
func WithNames(err error, names map[string]string) error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range joined.Unwrap() {
			errs = append(errs, WithNames(e, names))
		}
		return errors.Join(errs...)
	}
	if fe, ok := err.(*Error); ok {
		if name, ok := names[fe.Field]; ok {
			return &Error{Field: name, Value: fe.Value, Err: fe.Err}
		}
	}
	return err
}
