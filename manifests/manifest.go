package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/choice"
)

// Format is an output format of manifests.
type Format string

// Output formats.
const (
	FormatYAML Format = "yaml"
	FormatJSON Format = "json"
)

// ParseFormat accepts yaml or json.
func ParseFormat(s string) (Format, error) {
	return choice.Parse("output format", s, FormatYAML, FormatJSON)
}

// Manifest turns a typed object into the map that is printed and applied:
// what a user would write by hand. Fields the server owns (status,
// creationTimestamp) and empty values are left out, so applying the manifest
// claims no field it does not set.
func Manifest(obj runtime.Object) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s to a manifest: %w", obj.GetObjectKind().GroupVersionKind().Kind, err)
	}
	delete(m, "status")
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	prune(m)
	return m, nil
}

// prune removes nil values and maps left empty, depth first.
func prune(m map[string]any) {
	for k, v := range m {
		switch vv := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			prune(vv)
			if len(vv) == 0 {
				delete(m, k)
			}
		case []any:
			for _, item := range vv {
				if im, ok := item.(map[string]any); ok {
					prune(im)
				}
			}
		}
	}
}

// Marshal prints objects as YAML documents separated by ---, or as JSON: one
// object as is, several as a v1 List. Keys are sorted, so the output depends
// only on the objects.
func Marshal(format Format, objs ...runtime.Object) ([]byte, error) {
	manifests := make([]map[string]any, len(objs))
	for i, obj := range objs {
		m, err := Manifest(obj)
		if err != nil {
			return nil, err
		}
		manifests[i] = m
	}
	return MarshalManifests(format, manifests...)
}

// MarshalManifests prints manifests (maps as Manifest returns them, or
// unstructured contents) like Marshal.
func MarshalManifests(format Format, manifests ...map[string]any) ([]byte, error) {
	switch format {
	case FormatJSON:
		var v any
		if len(manifests) == 1 {
			v = manifests[0]
		} else {
			items := make([]any, len(manifests))
			for i, m := range manifests {
				items[i] = m
			}
			v = map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
		}
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("marshal JSON: %w", err)
		}
		return append(out, '\n'), nil
	case FormatYAML:
		var buf bytes.Buffer
		for i, m := range manifests {
			if i > 0 {
				buf.WriteString("---\n")
			}
			out, err := yaml.Marshal(m)
			if err != nil {
				return nil, fmt.Errorf("marshal YAML: %w", err)
			}
			buf.Write(out)
		}
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("unknown output format %q", format)
}

// ParseManifests reads YAML or JSON documents (separated by ---); a v1 List
// is expanded into its items. Empty documents are skipped. Errors name the
// document by its position, counted from 1.
func ParseManifests(data []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		jsonData, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if bytes.Equal(bytes.TrimSpace(jsonData), []byte("null")) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(jsonData); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			continue
		}
		out = append(out, u)
	}
}

// IsPeeringKind reports whether u is of the networking.liqo.io API group.
func IsPeeringKind(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind().Group == netv1beta1.GroupVersion.Group
}

// DecodeStrict decodes a networking.liqo.io/v1beta1 object into its Go type.
// Fields the type does not have are returned in unknown, each naming its
// path (unknown field "spec.mtuu"), and the object is decoded anyway; err is
// set when the kind is not of the API or the content does not fit the type.
func DecodeStrict(u *unstructured.Unstructured) (obj runtime.Object, unknown []error, err error) {
	scheme := runtime.NewScheme()
	if err := netv1beta1.AddToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("build scheme: %w", err)
	}
	gvk := u.GroupVersionKind()
	obj, err = scheme.New(gvk)
	if err != nil {
		if gvk.Version != netv1beta1.GroupVersion.Version {
			return nil, nil, fmt.Errorf("apiVersion %s is not served: use %s", u.GetAPIVersion(), netv1beta1.GroupVersion)
		}
		return nil, nil, fmt.Errorf("kind %q is not a kind of %s", gvk.Kind, netv1beta1.GroupVersion)
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, nil, fmt.Errorf("encode %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	unknown, err = sigsjson.UnmarshalStrict(data, obj)
	if err != nil {
		return nil, nil, err
	}
	return obj, unknown, nil
}
