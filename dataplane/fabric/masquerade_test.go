package fabric

import (
	"net/netip"
	"slices"
	"testing"

	"k8s.io/utils/ptr"

	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

func TestMasqueraded(t *testing.T) {
	ip := func(spec, status string, masq *bool) ipamv1alpha1.IP {
		return ipamv1alpha1.IP{Spec: ipamv1alpha1.IPSpec{IP: netv1beta1.IP(spec), Masquerade: masq}, Status: ipamv1alpha1.IPStatus{IP: netv1beta1.IP(status)}}
	}
	got := masqueraded([]ipamv1alpha1.IP{
		ip("192.168.1.1", "10.70.0.1", ptr.To(true)),
		ip("192.168.1.2", "10.70.0.2", ptr.To(false)),
		ip("192.168.1.3", "10.70.0.3", nil),
		ip("192.168.1.4", "", ptr.To(true)),
		ip("garbage", "10.70.0.5", ptr.To(true)),
	})
	if want := []netip.Addr{netip.MustParseAddr("192.168.1.1")}; !slices.Equal(got, want) {
		t.Errorf("masqueraded = %v, want %v", got, want)
	}
}
