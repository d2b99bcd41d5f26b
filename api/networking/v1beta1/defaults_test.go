package v1beta1

import (
	"encoding/json"
	"testing"
)

// TestDefaultsMatchCRDs holds the defaults of the Go code and those the
// generated CRDs give the API server to the same values, so that a manifest
// read offline means what it means once applied.
func TestDefaultsMatchCRDs(t *testing.T) {
	var server GatewayServerSpec
	server.Default()
	var client GatewayClientSpec
	client.Default()
	for _, c := range []struct {
		crd  string
		path []string
		want any
	}{
		{"gatewayservers", []string{"mtu"}, server.MTU},
		{"gatewayservers", []string{"endpoint", "port"}, server.Endpoint.Port},
		{"gatewayservers", []string{"endpoint", "serviceType"}, server.Endpoint.ServiceType},
		{"gatewayclients", []string{"mtu"}, client.MTU},
		{"gatewayclients", []string{"endpoint", "protocol"}, client.Endpoint.Protocol},
	} {
		got := crdDefault(t, c.crd, c.path)
		want, err := json.Marshal(c.want)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s spec.%v: the CRD defaults to %s, the Go code to %s", c.crd, c.path, got, want)
		}
	}
}

// crdDefault returns the default the generated CRD of plural gives the field
// at path under spec.
func crdDefault(t *testing.T, plural string, path []string) []byte {
	t.Helper()
	props := crdSchema(t, plural).Properties["spec"]
	for _, p := range path {
		props = props.Properties[p]
	}
	if props.Default == nil {
		t.Fatalf("%s spec.%v has no default in the CRD", plural, path)
	}
	return props.Default.Raw
}
