package services

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// TestTranslationsNotRemapped: a peer's Configuration not remapped yet
// makes none of its addresses reachable, and panics nothing.
func TestTranslationsNotRemapped(t *testing.T) {
	conf := &netv1beta1.Configuration{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo-tenant-b", Name: "b",
		Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: "b"}}}
	conf.Spec.Remote.CIDR.Pod = []netv1beta1.CIDR{"10.244.0.0/16"}
	if got := translations(conf); got != nil {
		t.Errorf("translations %v, want none", got)
	}
}
