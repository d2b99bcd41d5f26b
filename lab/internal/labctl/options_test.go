package labctl

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/lab/internal/cluster"
)

// TestValidateIPFamily refuses, before anything starts, what the lab cannot
// bring up with IPv6, naming the flag; the layouts it can bring up pass.
func TestValidateIPFamily(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Options.validate refuses anyone but root first")
	}
	base := Options{Dir: "/lab", Names: []string{"a", "b"}}
	for _, tc := range []struct {
		name   string
		change func(*Options)
		err    string
	}{
		{"ipv4 default", func(*Options) {}, ""},
		{"dual", func(o *Options) { o.IPFamilies = fams(cluster.DualStack) }, ""},
		{"ipv6 with ranges", func(o *Options) {
			o.IPFamilies, o.PodCIDRs6 = fams(cluster.IPv6), []netip.Prefix{netip.MustParsePrefix("fd44:1::/48"), netip.MustParsePrefix("fd44:2::/56")}
		}, ""},
		{"unknown family", func(o *Options) { o.IPFamilies = fams("ipv5") }, "--ip-family"},
		{"flannel", func(o *Options) { o.IPFamilies, o.CNI = fams(cluster.DualStack), cluster.Flannel }, "--ip-family dual: only with --cni bridge"},
		{"no node ranges", func(o *Options) { o.IPFamilies, o.NoNodePodCIDRs = fams(cluster.IPv6), true }, "--node-pod-cidrs=false"},
		{"metallb ipv6", func(o *Options) { o.IPFamilies, o.LoadBalancer = fams(cluster.IPv6), MetalLB }, "--load-balancer metallb"},
		{"ipv4 ranges on ipv6", func(o *Options) {
			o.IPFamilies, o.PodCIDRs = fams(cluster.IPv6), []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
		}, "--pod-cidrs: no cluster has IPv4 ranges"},
		{"v6 ranges on ipv4", func(o *Options) { o.PodCIDRs6 = []netip.Prefix{netip.MustParsePrefix("fd44::/48")} }, "--pod-cidrs-v6: no cluster has IPv6 ranges"},
		{"dual and ipv4", func(o *Options) { o.IPFamilies = fams(cluster.DualStack, cluster.IPv4) }, ""},
		{"ipv6 and ipv4, a range for all", func(o *Options) {
			o.IPFamilies, o.PodCIDRs, o.PodCIDRs6 = fams(cluster.IPv6, cluster.IPv4), prefixes("10.1.0.0/16"), prefixes("fd44:1::/48")
		}, ""},
		{"a v6 range per cluster, one of them ipv4", func(o *Options) {
			o.IPFamilies, o.PodCIDRs6 = fams(cluster.DualStack, cluster.IPv4), prefixes("fd44:1::/48", "fd44:2::/48")
		}, "--pod-cidrs-v6: one range per cluster, but not every cluster has IPv6 ranges"},
		{"an IPv4 range per cluster, one of them ipv6", func(o *Options) {
			o.IPFamilies, o.PodCIDRs = fams(cluster.IPv6, cluster.IPv4), prefixes("10.1.0.0/16", "10.2.0.0/16")
		}, "--pod-cidrs: one range per cluster"},
		{"three families for two clusters", func(o *Options) { o.IPFamilies = fams(cluster.DualStack, cluster.IPv4, cluster.IPv6) }, "--ip-family: 3 families for 2 clusters"},
		{"metallb with an ipv6 cluster", func(o *Options) {
			o.IPFamilies, o.LoadBalancer = fams(cluster.IPv4, cluster.IPv6), MetalLB
		}, "--load-balancer metallb"},
		{"v6 range too large", func(o *Options) {
			o.IPFamilies, o.PodCIDRs6 = fams(cluster.DualStack), []netip.Prefix{netip.MustParsePrefix("fd44::/40")}
		}, "--pod-cidrs-v6 fd44::/40: must be an IPv6 network of /48 to /60"},
		{"v6 range of IPv4", func(o *Options) {
			o.IPFamilies, o.PodCIDRs6 = fams(cluster.DualStack), []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		}, "must be an IPv6 network"},
		{"v6 range on the node networks", func(o *Options) {
			o.IPFamilies, o.PodCIDRs6 = fams(cluster.DualStack), []netip.Prefix{netip.MustParsePrefix("fd30:0:1::/48")}
		}, "overlaps the lab's fd30:0::/32"},
		{"three v6 ranges for two clusters", func(o *Options) {
			o.IPFamilies = fams(cluster.DualStack)
			o.PodCIDRs6 = []netip.Prefix{netip.MustParsePrefix("fd44:1::/48"), netip.MustParsePrefix("fd44:2::/48"), netip.MustParsePrefix("fd44:3::/48")}
		}, "--pod-cidrs-v6: 3 ranges for 2 clusters"},
	} {
		o := base
		tc.change(&o)
		err := o.validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.err)
		}
	}
}

func fams(f ...cluster.IPFamily) []cluster.IPFamily { return f }

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// TestDefaultPodCIDR6 gives IPv6 the layout of the IPv4 pod ranges:
// clusters that share one share fd44::/48, clusters with one each get
// fd44:<index>::/48.
func TestDefaultPodCIDR6(t *testing.T) {
	shared := Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	distinct := Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.245.0.0/16")}}
	for _, tc := range []struct {
		o    Options
		want string
	}{{Options{}, "fd44::/48"}, {shared, "fd44::/48"}, {distinct, "fd44:12::/48"}} {
		if got := tc.o.defaultPodCIDR6(12).String(); got != tc.want {
			t.Errorf("IPv4 ranges %v: IPv6 range of cluster 12 %s, want %s", tc.o.PodCIDRs, got, tc.want)
		}
	}
}
