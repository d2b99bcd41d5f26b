package gateway

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
)

func TestIPMappings(t *testing.T) {
	local := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.70.0.0/16")}
	unknown := netip.MustParseAddr("10.70.0.0")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ip := func(name string, age int, spec, status string) ipamv1alpha1.IP {
		return ipamv1alpha1.IP{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Second))},
			Spec:       ipamv1alpha1.IPSpec{IP: netv1beta1.IP(spec)},
			Status:     ipamv1alpha1.IPStatus{IP: netv1beta1.IP(status)},
		}
	}
	ips := []ipamv1alpha1.IP{
		ip("b", 2, "192.168.1.2", "10.70.0.2"),
		ip("a", 1, "192.168.1.1", "10.70.0.1"),
		ip("unallocated", 3, "192.168.1.3", ""),
		ip("outside-external", 4, "192.168.1.4", "10.71.0.1"),
		ip("unknown-source", 5, "192.168.1.5", "10.70.0.0"),
		ip("a-pod", 6, "10.244.1.1", "10.70.0.6"),
		ip("younger-twin", 7, "192.168.1.7", "10.70.0.1"),
		ip("garbage", 8, "not-an-ip", "10.70.0.8"),
	}
	want := []dataplane.IPMapping{
		{Local: netip.MustParseAddr("192.168.1.1"), Remapped: netip.MustParseAddr("10.70.0.1")},
		{Local: netip.MustParseAddr("192.168.1.2"), Remapped: netip.MustParseAddr("10.70.0.2")},
	}
	if got := IPMappings(ips, local, unknown); !slices.Equal(got, want) {
		t.Errorf("IPMappings = %v, want %v", got, want)
	}
	if got := IPMappings(ips, local, netip.Addr{}); got != nil {
		t.Errorf("IPMappings without an unknown source = %v, want none", got)
	}

	var many []ipamv1alpha1.IP
	for i := range dataplane.MaxIPs + 5 {
		many = append(many, ip("h", i, "192.168.1.1", netip.AddrFrom4([4]byte{10, 70, byte(1 + i/256), byte(i % 256)}).String()))
	}
	if got := IPMappings(many, local, unknown); len(got) != dataplane.MaxIPs {
		t.Errorf("IPMappings of %d IPs: %d, want %d", len(many), len(got), dataplane.MaxIPs)
	}
}
