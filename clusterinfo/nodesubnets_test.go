package clusterinfo

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerlink/peerlink/internal/cidr"
)

func TestNodeSubnets(t *testing.T) {
	node := func(v string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{NodeSubnetsAnnotation: v}}}
	}
	for _, tc := range []struct {
		value string
		want  []netip.Prefix
	}{
		{"", nil},
		{"10.0.0.0/16", cidr.MustPrefixes("10.0.0.0/16")},
		// IPv6, hosts bits and garbage are skipped, the rest kept.
		{" 192.168.1.0/24 ,fd00::/64,10.1.2.3/16,junk,,172.31.0.0/16", cidr.MustPrefixes("192.168.1.0/24", "172.31.0.0/16")},
	} {
		if got := NodeSubnets(node(tc.value)); !slices.Equal(got, tc.want) {
			t.Errorf("NodeSubnets(%q) = %v, want %v", tc.value, got, tc.want)
		}
	}
	if got := NodeSubnets(&corev1.Node{}); got != nil {
		t.Errorf("NodeSubnets of a node without the annotation = %v", got)
	}
	// A value of any size costs at most maxNodeSubnetsRead entries.
	var long string
	for i := range 1000 {
		long += fmt.Sprintf("10.%d.%d.0/24,", i/256, i%256)
	}
	if got := NodeSubnets(node(long)); len(got) != maxNodeSubnetsRead {
		t.Errorf("NodeSubnets of 1000 entries kept %d, want %d", len(got), maxNodeSubnetsRead)
	}
}

func TestSummariseNodeSubnets(t *testing.T) {
	got := SummariseNodeSubnets(cidr.MustPrefixes("192.168.0.0/24", "10.0.0.0/8", "10.1.0.0/16", "192.168.0.0/24", "172.16.5.0/24", "10.200.3.0/24"))
	if want := cidr.MustPrefixes("10.0.0.0/8", "172.16.5.0/24", "192.168.0.0/24"); !slices.Equal(got, want) {
		t.Errorf("SummariseNodeSubnets = %v, want %v (sorted, nested ones dropped)", got, want)
	}
	// Over the bound, widened to /16s, then to /8s: every network stays
	// held by one of the summary.
	for _, tc := range []struct {
		n, want int
	}{{64, 64}, {100, 50}, {200, 1}} {
		var many []netip.Prefix
		for i := range tc.n {
			many = append(many, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i / 2), byte(i % 2), 0}), 24))
		}
		got := SummariseNodeSubnets(many)
		if len(got) != tc.want {
			t.Errorf("SummariseNodeSubnets of %d /24s: %d networks (%v), want %d", tc.n, len(got), got, tc.want)
		}
		for _, p := range many {
			if !slices.ContainsFunc(got, func(s netip.Prefix) bool { return s.Bits() <= p.Bits() && s.Contains(p.Addr()) }) {
				t.Errorf("%v is not held by the summary of %d /24s", p, tc.n)
			}
		}
	}
}
