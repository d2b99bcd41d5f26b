package v1beta1

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestListBoundsMatchCRDs holds the maxItems of the lists a peer fills in
// the generated CRDs to the constants the Go validation uses, so that the
// API server and the CLI refuse the same lists.
func TestListBoundsMatchCRDs(t *testing.T) {
	for _, c := range []struct {
		crd  string
		path []string
		want int64
	}{
		{"configurations", []string{"spec", "remote", "cidr", "pod"}, MaxCIDRs},
		{"configurations", []string{"spec", "remote", "cidr", "external"}, MaxCIDRs},
		{"configurations", []string{"spec", "local", "cidr", "pod"}, MaxCIDRs},
		{"configurations", []string{"spec", "local", "cidr", "external"}, MaxCIDRs},
		{"configurations", []string{"status", "remote", "cidr", "pod"}, MaxCIDRs},
		{"gatewayclients", []string{"spec", "endpoint", "addresses"}, MaxEndpointAddresses},
		{"gatewayclients", []string{"spec", "endpoint", "ports"}, MaxEndpointPorts},
		{"gatewayservers", []string{"status", "endpoint", "addresses"}, MaxEndpointAddresses},
		{"gatewayservers", []string{"spec", "endpoint", "ports"}, MaxEndpointPorts},
		{"gatewayservers", []string{"spec", "endpoint", "nodePorts"}, MaxEndpointPorts},
	} {
		props := crdSchema(t, c.crd)
		for _, p := range c.path {
			var ok bool
			if props, ok = props.Properties[p]; !ok {
				t.Fatalf("%s: no field %v in the CRD", c.crd, c.path)
			}
		}
		if props.MaxItems == nil || *props.MaxItems != c.want {
			t.Errorf("%s %v: maxItems %v in the CRD, want %d", c.crd, c.path, props.MaxItems, c.want)
		}
	}
}

// crdSchema returns the schema of the generated CRD of plural.
func crdSchema(t *testing.T, plural string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "bundles", "install", "crds", GroupVersion.Group+"_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("%s: %v", plural, err)
	}
	return *crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}
