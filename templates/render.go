package templates

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// Data holds the variables a template sees.
type Data struct {
	// Spec is the gateway's spec as its Go type (a netv1beta1.GatewayServerSpec
	// or netv1beta1.GatewayClientSpec value), so templates use Go field names:
	// {{ .Spec.Endpoint.Port }}.
	Spec any
	// Name is the name of the gateway object, and of the rendered object.
	Name string
	// Namespace is the namespace of the gateway object, and of the rendered object.
	Namespace string
	// GatewayUID is the UID of the gateway object.
	GatewayUID string
	// ClusterID is the ID of the remote cluster, from the gateway's
	// liqo.io/remote-cluster-id label.
	ClusterID string
	// SecretName names the Secret holding the gateway's key pair.
	SecretName string
}

// optionalPrefix starts a key that is kept only when its value renders non-empty.
const optionalPrefix = "?"

// Render renders the template object tmpl, of any kind with spec.objectKind
// and spec.template, into an object of spec.objectKind named data.Name in
// data.Namespace. It follows the rules in the package documentation and
// neither modifies tmpl nor does any I/O. Errors name the template object and
// the path of the offending field in the rendered object.
func Render(tmpl *unstructured.Unstructured, data Data) (*unstructured.Unstructured, error) {
	if tmpl == nil {
		return nil, errors.New("render: no template object")
	}
	obj, err := render(tmpl.Object, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", describe(tmpl), err)
	}
	return obj, nil
}

// describe names a template object in errors: "Kind namespace/name".
func describe(u *unstructured.Unstructured) string {
	kind, _ := u.Object["kind"].(string)
	if kind == "" {
		kind = "template"
	}
	md, _ := u.Object["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	switch {
	case name == "":
		return kind
	case ns == "":
		return kind + " " + name
	default:
		return kind + " " + ns + "/" + name
	}
}

func render(tmpl map[string]any, data Data) (*unstructured.Unstructured, error) {
	if data.Name == "" {
		return nil, errors.New("no name for the rendered object: Data.Name is empty")
	}
	spec, ok := tmpl["spec"].(map[string]any)
	if !ok {
		return nil, errors.New("spec: missing or not an object")
	}
	kind, err := objectKind(spec)
	if err != nil {
		return nil, err
	}
	body, ok := spec["template"].(map[string]any)
	if !ok {
		return nil, errors.New("spec.template: missing or not an object")
	}
	for _, k := range sortedKeys(body) {
		if k != "metadata" && k != "spec" {
			return nil, fmt.Errorf("spec.template: unknown field %q: a template holds only metadata and spec", k)
		}
	}

	r := &renderer{dot: dot(data), data: data, out: &outputBudget{left: maxOutput}, steps: newStepBudget(time.Now())}
	obj := map[string]any{"apiVersion": kind.APIVersion, "kind": kind.Kind}
	md, err := r.metadata(body["metadata"])
	if err != nil {
		return nil, err
	}
	obj["metadata"] = md
	if s, ok := body["spec"]; ok {
		v, err := r.value("spec", s, specType(kind), false)
		if err != nil {
			return nil, err
		}
		obj["spec"] = v
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// objectKind reads spec.objectKind of a template object.
func objectKind(spec map[string]any) (netv1beta1.ObjectKind, error) {
	ok, isMap := spec["objectKind"].(map[string]any)
	if !isMap {
		return netv1beta1.ObjectKind{}, errors.New("spec.objectKind: missing or not an object")
	}
	var kind netv1beta1.ObjectKind
	for _, f := range []struct {
		name string
		dst  *string
	}{{"apiVersion", &kind.APIVersion}, {"kind", &kind.Kind}} {
		s, _ := ok[f.name].(string)
		if s == "" {
			return netv1beta1.ObjectKind{}, fmt.Errorf("spec.objectKind.%s: missing or not a string", f.name)
		}
		*f.dst = s
	}
	return kind, nil
}

// renderer renders the values of one template object.
type renderer struct {
	// dot is what templates see as ".", made from Data by dot.
	dot any
	// data is the Data dot was made from.
	data Data
	out  *outputBudget
	// steps is the step and time budget of the whole object.
	steps *stepBudget
	// funcs are the functions templates call, made once per object.
	funcs template.FuncMap
}

// dot returns the value templates execute on: the fields of Data, but with
// Spec of its dynamic type instead of any, so that text/template names the
// spec's type in errors ("can't evaluate field Mtu in type
// v1beta1.GatewayServerSpec" rather than "in type interface {}"). The value
// is a copy, not addressable, so no template can change it through a method.
func dot(d Data) any {
	if d.Spec == nil {
		return d
	}
	str := reflect.TypeFor[string]()
	t := reflect.StructOf([]reflect.StructField{
		{Name: "Spec", Type: reflect.TypeOf(d.Spec)},
		{Name: "Name", Type: str},
		{Name: "Namespace", Type: str},
		{Name: "GatewayUID", Type: str},
		{Name: "ClusterID", Type: str},
		{Name: "SecretName", Type: str},
	})
	v := reflect.New(t).Elem()
	v.Field(0).Set(reflect.ValueOf(d.Spec))
	for i, s := range []string{d.Name, d.Namespace, d.GatewayUID, d.ClusterID, d.SecretName} {
		v.Field(i + 1).SetString(s)
	}
	return v.Interface()
}

// metadata renders spec.template.metadata. The rendered object is always
// named data.Name in data.Namespace: a template may spell them out, but not
// name the object otherwise, because the controller finds the object by the
// gateway's name.
func (r *renderer) metadata(v any) (map[string]any, error) {
	md := map[string]any{}
	if v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("metadata: %s, not an object", typeName(v))
		}
		for _, k := range sortedKeys(m) {
			switch strings.TrimPrefix(k, optionalPrefix) {
			case "name", "namespace", "labels", "annotations":
			default:
				return nil, fmt.Errorf("metadata: unknown field %q: a template sets only name, namespace, labels and annotations", k)
			}
		}
		rendered, err := r.object("metadata", m, metadataType)
		if err != nil {
			return nil, err
		}
		md = rendered
	}
	for _, f := range []struct{ field, want, variable string }{
		{"name", r.data.Name, ".Name"},
		{"namespace", r.data.Namespace, ".Namespace"},
	} {
		got, _ := md[f.field].(string)
		if got != "" && got != f.want {
			return nil, fmt.Errorf("metadata.%s: renders %q, but the rendered object is always %q (%s)", f.field, got, f.want, f.variable)
		}
		if f.want != "" {
			md[f.field] = f.want
		}
	}
	return md, nil
}

// value renders v found at path; t is the Go type of the field in the
// rendered kind, nil when unknown.
func (r *renderer) value(path string, v any, t reflect.Type, optional bool) (any, error) {
	if err := r.steps.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch v := v.(type) {
	case map[string]any:
		if what := scalarName(t); what != "" {
			return nil, fmt.Errorf("%s: an object, but the field is %s", path, what)
		}
		return r.object(path, v, t)
	case []any:
		if what := scalarName(t); what != "" {
			return nil, fmt.Errorf("%s: a list, but the field is %s", path, what)
		}
		return r.list(path, v, t)
	case string:
		return r.text(path, v, t, optional)
	case nil, int64, float64, bool:
		return literal(v, t), nil
	default:
		return nil, fmt.Errorf("%s: unsupported value of Go type %T", path, v)
	}
}

func (r *renderer) object(path string, m map[string]any, t reflect.Type) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for _, k := range sortedKeys(m) {
		name, optional := strings.CutPrefix(k, optionalPrefix)
		p := childPath(path, k)
		if k == portsDirective {
			if _, dup := m["ports"]; dup {
				return nil, fmt.Errorf("%s: both ports and %s are set: the directive makes the ports list", p, portsDirective)
			}
			ports, err := r.expandPorts(p, m[k])
			if err != nil {
				return nil, err
			}
			out["ports"] = ports
			continue
		}
		switch {
		case name == "" || strings.HasPrefix(name, optionalPrefix):
			return nil, fmt.Errorf("%s: a key is one %q and a name, or a name", p, optionalPrefix)
		case strings.Contains(name, "{{"):
			return nil, fmt.Errorf("%s: keys are not templated, only values", p)
		}
		if _, dup := m[name]; optional && dup {
			return nil, fmt.Errorf("%s: both %q and %q are set", p, name, k)
		}
		ft := fieldType(t, name)
		if ft == nil && (name == "labels" || name == "annotations") {
			// Label and annotation values are strings in every kind, so
			// they stay strings wherever the kind's Go type is unknown,
			// under metadata or not.
			ft = stringMapType
		}
		v, err := r.value(p, m[k], ft, optional)
		if err != nil {
			return nil, err
		}
		if optional && isEmpty(v) {
			continue
		}
		out[name] = v
	}
	return out, nil
}

func (r *renderer) list(path string, l []any, t reflect.Type) ([]any, error) {
	et := elemType(t)
	out := make([]any, 0, len(l))
	for i, item := range l {
		v, err := r.value(fmt.Sprintf("%s[%d]", path, i), item, et, false)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// text renders a string and gives the result the type of its field.
func (r *renderer) text(path, src string, t reflect.Type, optional bool) (any, error) {
	s, single, err := r.execute(src)
	if err != nil {
		return nil, fmt.Errorf("%s: template %s: %w", path, quoteTemplate(src), err)
	}
	v, err := convert(s, single, t)
	if err != nil {
		return nil, fmt.Errorf("%s: template %s: %w", path, quoteTemplate(src), err)
	}
	if !optional && v == "" && isNumberOrBool(t) {
		what := "number"
		if deref(t).Kind() == reflect.Bool {
			what = "boolean"
		}
		return nil, fmt.Errorf("%s: template %s renders empty, but the field is a %s; make the key optional (?) to drop it when empty", path, quoteTemplate(src), what)
	}
	return v, nil
}

// convert gives the rendered string s the type of its field t. Where t is
// unknown, s becomes an integer only when the template was exactly one action
// (single) rendering an integer in canonical form, so that literal text and
// strings that merely contain digits stay strings.
func convert(s string, single bool, t reflect.Type) (any, error) {
	t = deref(t)
	if t == nil || t.Kind() == reflect.Interface {
		if n, err := strconv.ParseInt(s, 10, 64); single && err == nil && strconv.FormatInt(n, 10) == s {
			return n, nil
		}
		return s, nil
	}
	trimmed := strings.TrimSpace(s)
	if t == intOrStringType {
		if n, err := strconv.ParseInt(trimmed, 10, 32); err == nil {
			return n, nil
		}
		return s, nil
	}
	if trimmed == "" && isNumberOrBool(t) {
		// Empty is kept as "" so that an optional key drops; text reports
		// it for keys that are not optional.
		return "", nil
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(trimmed, 10, t.Bits())
		if err != nil {
			return nil, fmt.Errorf("renders %q, not a %d-bit integer", s, t.Bits())
		}
		return n, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(trimmed, 10, t.Bits())
		if err != nil || n > 1<<63-1 {
			return nil, fmt.Errorf("renders %q, not an unsigned %d-bit integer", s, t.Bits())
		}
		return int64(n), nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(trimmed, t.Bits())
		if err != nil {
			return nil, fmt.Errorf("renders %q, not a number", s)
		}
		return f, nil
	case reflect.Bool:
		switch trimmed {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("renders %q, not true or false", s)
	}
	// Strings, and structs that decode from a string (quantities, times),
	// stay strings; a string where an object or list belongs is left for
	// the API server's validation to report.
	return s, nil
}

// literal gives a non-string literal of the template the type of its field
// where that field is a string, so that label values and env values written
// as YAML numbers or booleans come out as strings.
func literal(v any, t reflect.Type) any {
	t = deref(t)
	if t == nil || t.Kind() != reflect.String || v == nil {
		return v
	}
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return v
}

// scalarName names what a field of type t holds when that is a string, a
// number or a boolean ("a string"), and returns "" for objects, lists and
// unknown types. An object or list where a scalar belongs is an error of the
// template: in labels and annotations it would make the rendered metadata
// unreadable.
func scalarName(t reflect.Type) string {
	t = deref(t)
	switch {
	case t == nil:
		return ""
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "a boolean"
	case isNumberOrBool(t):
		return "a number"
	}
	return ""
}

func isNumberOrBool(t reflect.Type) bool {
	t = deref(t)
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Bool:
		return true
	}
	return false
}

// isEmpty reports whether a rendered value counts as empty for an optional
// key: "", 0, false, null, or a map or list whose entries are all empty. The
// depth makes ?secretRef: {name: "{{ .Spec.SecretRef.Name }}"} drop when the
// name is empty.
func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case int64:
		return v == 0
	case float64:
		return v == 0
	case map[string]any:
		for _, e := range v {
			if !isEmpty(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !isEmpty(e) {
				return false
			}
		}
		return true
	}
	return false
}

var plainKey = regexp.MustCompile(`^\??[A-Za-z_][A-Za-z0-9_-]*$`)

// childPath appends a map key to a field path, quoting keys that are not
// plain names (label keys such as app.kubernetes.io/name).
func childPath(path, key string) string {
	if plainKey.MatchString(key) {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func typeName(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case int64, float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("a %T", v)
}

var (
	metadataType    = reflect.TypeFor[netv1beta1.TemplateMetadata]()
	stringMapType   = reflect.TypeFor[map[string]string]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
)
