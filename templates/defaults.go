package templates

import (
	"embed"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// The embedded default templates. The controller keeps them applied in its
// namespace; the install bundle carries no copy.
const (
	serverFile = "wireguard-server.yaml"
	clientFile = "wireguard-client.yaml"
)

//go:embed wireguard-server.yaml wireguard-client.yaml
var defaultFS embed.FS

// DefaultImage is the image the default templates run gateways with.
const DefaultImage = "ghcr.io/peerlink/peerlink-agent:latest"

// WithImage returns the templates with every container image DefaultImage
// replaced by image: the controller's own, so that gateways run what an
// overlay's images: or a Helm value chose for the installation.
func WithImage(objs []*unstructured.Unstructured, image string) []*unstructured.Unstructured {
	if image == "" || image == DefaultImage {
		return objs
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				if s, ok := e.(string); ok && k == "image" && s == DefaultImage {
					t[k] = image
					continue
				}
				t[k] = walk(e)
			}
		case []any:
			for i, e := range t {
				t[i] = walk(e)
			}
		}
		return v
	}
	for _, o := range objs {
		walk(o.Object)
	}
	return objs
}

// Defaults returns fresh copies of the default templates, server first:
// wireguard-server (WgGatewayServerTemplate) and wireguard-client
// (WgGatewayClientTemplate), in namespace InstallNamespace.
func Defaults() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, name := range []string{serverFile, clientFile} {
		b, err := defaultFS.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("default template %s: %w", name, err)
		}
		obj, err := decodeYAML(b)
		if err != nil {
			return nil, fmt.Errorf("default template %s: %w", name, err)
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out, nil
}

// decodeYAML decodes one YAML document into the values unstructured objects
// hold: integers as int64, other numbers as float64.
func decodeYAML(b []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(j, &obj); err != nil {
		return nil, err
	}
	return obj, nil
}
