package manifests

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestWithNames names each field of an *InvalidError by the caller's name
// for it, list items by their list's, and keeps other fields and errors.
func TestWithNames(t *testing.T) {
	_, err := GatewayServer(GatewayServerOptions{Peer: Peer{RemoteClusterID: "b"}, ServiceType: corev1.ServiceTypeClusterIP, NodePort: 30000, MTU: 100})
	got := WithNames(err, map[string]string{"spec.endpoint.nodePort": "--node-port"}).Error()
	for _, want := range []string{"--node-port (spec.endpoint.nodePort): Forbidden", "spec.mtu: Invalid value: 100"} {
		if !strings.Contains(got, want) {
			t.Errorf("WithNames: %q lacks %q", got, want)
		}
	}
	_, err = Configuration(ConfigurationOptions{Peer: Peer{RemoteClusterID: "b"}, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}})
	if got := WithNames(err, map[string]string{"spec.remote.cidr.pod": "--pod-cidr"}); err == nil || !strings.HasPrefix(got.Error(), "--pod-cidr (spec.remote.cidr.pod[0]): ") {
		t.Errorf("WithNames of a list item: %v", got)
	}
	if other := errors.New("other"); WithNames(other, nil) != other || WithNames(nil, nil) != nil {
		t.Error("WithNames changed an error that is not an *InvalidError")
	}
}
