package gateway

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/cidr"
)

// FuzzRangeMappings feeds RangeMappings Configurations with arbitrary
// strings where CIDRs belong, pairing spec and status entries of any count:
// it never panics, and every mapping it returns pairs two networks (no
// host bits) taken from the same position of spec and status.
func FuzzRangeMappings(f *testing.F) {
	f.Add("10.244.0.0/16,10.245.0.0/16", "10.71.0.0/16", "10.70.0.0/16", "10.72.0.0/16")
	f.Add("169.254.0.0/16", "10.0.0.0/16", "", "")
	f.Add("::ffff:10.0.0.0/104", "10.1.0.0/8", "fd00::/64", "fd00::/64")
	f.Add("10.244.0.1/16,,", ",10.0.0.0/16", "0.0.0.0/0", "")
	f.Fuzz(func(t *testing.T, pod, podStatus, ext, extStatus string) {
		cidrs := func(s string) []netv1beta1.CIDR {
			if s == "" {
				return nil
			}
			var out []netv1beta1.CIDR
			for _, f := range strings.Split(s, ",") {
				out = append(out, netv1beta1.CIDR(f))
			}
			return out
		}
		conf := &netv1beta1.Configuration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "peer"}}
		conf.Spec.Remote.CIDR = netv1beta1.ClusterConfigCIDR{Pod: cidrs(pod), External: cidrs(ext)}
		conf.Status.Remote = &netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{Pod: cidrs(podStatus), External: cidrs(extStatus)}}
		got, err := RangeMappings(conf)
		if err != nil {
			if !strings.Contains(err.Error(), "of Configuration ns/peer") {
				t.Fatalf("error %q does not name the Configuration", err)
			}
			return
		}
		real := append(cidrs(pod), cidrs(ext)...)
		remapped := append(cidrs(podStatus), cidrs(extStatus)...)
		for _, m := range got {
			if !m.Real.IsValid() || m.Real != m.Real.Masked() || !m.Remapped.IsValid() || m.Remapped != m.Remapped.Masked() {
				t.Fatalf("mapping %v: not two networks", m)
			}
			if !containsCIDR(real, m.Real.String()) || !containsCIDR(remapped, m.Remapped.String()) {
				t.Fatalf("mapping %v: not from spec %v and status %v", m, real, remapped)
			}
		}
		if len(got) > len(real) {
			t.Fatalf("%d mappings from %d declared ranges", len(got), len(real))
		}
	})
}

// containsCIDR reports whether one of cs, parsed, is the network s.
func containsCIDR(cs []netv1beta1.CIDR, s string) bool {
	for _, c := range cs {
		if p, err := cidr.ParseNetwork(string(c)); err == nil && p.String() == s {
			return true
		}
	}
	return false
}
