package templates

import (
	"reflect"
	"strings"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// specType returns the Go type of the spec of a kind the engine knows, nil
// for any other kind (a custom tunnel technology), whose strings then follow
// the integer fallback.
func specType(kind netv1beta1.ObjectKind) reflect.Type {
	if kind.APIVersion != netv1beta1.GroupVersion.String() {
		return nil
	}
	switch kind.Kind {
	case "WgGatewayServer":
		return reflect.TypeFor[netv1beta1.WgGatewayServerSpec]()
	case "WgGatewayClient":
		return reflect.TypeFor[netv1beta1.WgGatewayClientSpec]()
	}
	return nil
}

// fieldType returns the Go type of the field a JSON object key names in a
// value of type t: a struct field by its JSON name (looking into inlined
// embedded structs as encoding/json does) or a map's element. It returns nil
// when t is unknown or has no such field.
func fieldType(t reflect.Type, name string) reflect.Type {
	t = deref(t)
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return structField(t, name)
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			return t.Elem()
		}
	}
	return nil
}

func structField(t reflect.Type, name string) reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" && f.Anonymous {
			if ft := fieldType(f.Type, name); ft != nil {
				return ft
			}
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f.Type
		}
	}
	return nil
}

// elemType returns the type of the items of a list of type t, nil when
// unknown.
func elemType(t reflect.Type) reflect.Type {
	t = deref(t)
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return t.Elem()
	}
	return nil
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
