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
