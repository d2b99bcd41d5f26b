package v1beta1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestEndpointResolved(t *testing.T) {
	for _, c := range []struct {
		name     string
		in, want Endpoint
	}{
		{"port only", Endpoint{Port: 51840}, Endpoint{Port: 51840, Ports: []int32{51840}}},
		{"ports win over the defaulted port", Endpoint{Port: 51840, Ports: []int32{51841}}, Endpoint{Port: 51841, Ports: []int32{51841}}},
		{"node port only", Endpoint{Port: 1, NodePort: ptr.To[int32](30100)},
			Endpoint{Port: 1, Ports: []int32{1}, NodePort: ptr.To[int32](30100), NodePorts: []int32{30100}}},
		{"node ports win", Endpoint{Port: 1, NodePort: ptr.To[int32](30100), NodePorts: []int32{30101}},
			Endpoint{Port: 1, Ports: []int32{1}, NodePort: ptr.To[int32](30101), NodePorts: []int32{30101}}},
		{"a zero node port pins nothing", Endpoint{Port: 1, NodePort: ptr.To[int32](0), NodePorts: []int32{0}},
			Endpoint{Port: 1, Ports: []int32{1}, NodePort: ptr.To[int32](0)}},
	} {
		t.Run(c.name, func(t *testing.T) { checkResolved(t, c.in, c.want) })
	}
}

func TestGatewayClientEndpointResolved(t *testing.T) {
	for _, c := range []struct {
		name     string
		in, want GatewayClientEndpoint
	}{
		{"port only", GatewayClientEndpoint{Port: 32701}, GatewayClientEndpoint{Port: 32701, Ports: []int32{32701}}},
		{"ports only", GatewayClientEndpoint{Ports: []int32{32701}}, GatewayClientEndpoint{Port: 32701, Ports: []int32{32701}}},
		{"both", GatewayClientEndpoint{Port: 32701, Ports: []int32{32701}}, GatewayClientEndpoint{Port: 32701, Ports: []int32{32701}}},
		{"no port yet", GatewayClientEndpoint{Addresses: []string{"192.0.2.1"}}, GatewayClientEndpoint{Addresses: []string{"192.0.2.1"}}},
	} {
		t.Run(c.name, func(t *testing.T) { checkResolved(t, c.in, c.want) })
	}
}

// checkResolved checks that in.Resolved() is want and leaves in as it was.
func checkResolved[T interface{ Resolved() T }](t *testing.T, in, want T) {
	t.Helper()
	before := in
	if diff := cmp.Diff(want, in.Resolved()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, in); diff != "" {
		t.Errorf("Resolved changed its receiver's lists:\n%s", diff)
	}
}
