package templates

import (
	"errors"
	"fmt"
	"reflect"
)

// The comparison functions of text/template (eq, ne, lt, le, gt, ge) are
// replaced by these, which give the same results but let eq check the
// deadline between its arguments: a builtin eq of one string against a
// thousand others of 1 MiB each would otherwise run for a second inside
// one call.

var (
	errNotComparable = errors.New("invalid type for comparison")
	errNoOperand     = errors.New("missing argument for comparison")
)

// basic groups the kinds text/template compares by value.
type basic int

const (
	noBasic basic = iota
	boolBasic
	complexBasic
	intBasic
	floatBasic
	stringBasic
	uintBasic
)

func basicOf(v reflect.Value) basic {
	switch v.Kind() {
	case reflect.Bool:
		return boolBasic
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intBasic
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintBasic
	case reflect.Float32, reflect.Float64:
		return floatBasic
	case reflect.Complex64, reflect.Complex128:
		return complexBasic
	case reflect.String:
		return stringBasic
	}
	return noBasic
}

// unwrap is the value inside an interface, one level deep, or the zero
// Value for a nil interface, as text/template takes its operands.
func unwrap(v reflect.Value) reflect.Value {
	if v.Kind() != reflect.Interface {
		return v
	}
	if v.IsNil() {
		return reflect.Value{}
	}
	return v.Elem()
}

// nilValue reports whether v is no value or the nil of its type.
func nilValue(v reflect.Value) bool {
	if !v.IsValid() {
		return true
	}
	switch v.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return v.IsNil()
	}
	return false
}

// equal reports whether a equals any of others, as text/template's eq
// does: basic values by kind (integers whatever their sign), other values
// of one kind with ==, nil against nil. check, when not nil, is called
// before each comparison and stops at its error.
func equal(check func() error, a reflect.Value, others ...reflect.Value) (bool, error) {
	a = unwrap(a)
	if len(others) == 0 {
		return false, errNoOperand
	}
	ka := basicOf(a)
	for _, o := range others {
		if check != nil {
			if err := check(); err != nil {
				return false, err
			}
		}
		o = unwrap(o)
		ko := basicOf(o)
		var same bool
		switch {
		case ka == intBasic && ko == uintBasic:
			same = a.Int() >= 0 && uint64(a.Int()) == o.Uint()
		case ka == uintBasic && ko == intBasic:
			same = o.Int() >= 0 && a.Uint() == uint64(o.Int())
		case ka != ko:
			if a.IsValid() && o.IsValid() {
				return false, fmt.Errorf("incompatible types for comparison: %v and %v", a.Type(), o.Type())
			}
		case ka == boolBasic:
			same = a.Bool() == o.Bool()
		case ka == complexBasic:
			same = a.Complex() == o.Complex()
		case ka == floatBasic:
			same = a.Float() == o.Float()
		case ka == intBasic:
			same = a.Int() == o.Int()
		case ka == stringBasic:
			same = a.String() == o.String()
		case ka == uintBasic:
			same = a.Uint() == o.Uint()
		default:
			if a.Kind() != o.Kind() && a.IsValid() && o.IsValid() {
				return false, fmt.Errorf("non-comparable types %s: %v, %s: %v", a, a.Type(), o.Type(), o)
			}
			if nilValue(a) || nilValue(o) {
				same = nilValue(a) == nilValue(o)
				break
			}
			if !o.Type().Comparable() {
				return false, fmt.Errorf("non-comparable type %s: %v", o, o.Type())
			}
			same = a.Interface() == o.Interface()
		}
		if same {
			return true, nil
		}
	}
	return false, nil
}

// less reports whether a < b, as text/template's lt does: for basic values
// of one kind but bool and complex, and integers whatever their sign.
func less(a, b reflect.Value) (bool, error) {
	a, b = unwrap(a), unwrap(b)
	ka, kb := basicOf(a), basicOf(b)
	if ka == noBasic || kb == noBasic {
		return false, errNotComparable
	}
	switch {
	case ka == intBasic && kb == uintBasic:
		return a.Int() < 0 || uint64(a.Int()) < b.Uint(), nil
	case ka == uintBasic && kb == intBasic:
		return b.Int() >= 0 && a.Uint() < uint64(b.Int()), nil
	case ka != kb:
		return false, fmt.Errorf("incompatible types for comparison: %v and %v", a.Type(), b.Type())
	}
	switch ka {
	case floatBasic:
		return a.Float() < b.Float(), nil
	case intBasic:
		return a.Int() < b.Int(), nil
	case stringBasic:
		return a.String() < b.String(), nil
	case uintBasic:
		return a.Uint() < b.Uint(), nil
	}
	return false, errNotComparable
}
