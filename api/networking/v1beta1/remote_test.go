package v1beta1

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestRemoteRanges(t *testing.T) {
	conf := func(pod, ext, podStatus, extStatus []CIDR) *Configuration {
		c := &Configuration{}
		c.Name, c.Namespace = "b", "liqo-tenant-b"
		c.Spec.Remote.CIDR = ClusterConfigCIDR{Pod: pod, External: ext}
		if podStatus != nil || extStatus != nil {
			c.Status.Remote = &ClusterConfig{CIDR: ClusterConfigCIDR{Pod: podStatus, External: extStatus}}
		}
		return c
	}
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		name string
		conf *Configuration
		want []RemoteRange
		err  string
	}{
		{"not allocated yet", conf([]CIDR{"10.244.0.0/16"}, []CIDR{"10.70.0.0/16"}, nil, nil),
			[]RemoteRange{{Field: "pod", Real: p("10.244.0.0/16")}, {Field: "external", Real: p("10.70.0.0/16")}}, ""},
		{"kept and remapped", conf([]CIDR{"10.244.0.0/16", "10.245.0.0/24"}, []CIDR{"10.70.0.0/16"}, []CIDR{"10.71.0.0/16", "10.245.0.0/24"}, []CIDR{"10.72.0.0/16"}),
			[]RemoteRange{
				{Field: "pod", Real: p("10.244.0.0/16"), Remapped: p("10.71.0.0/16")},
				{Field: "pod", Index: 1, Real: p("10.245.0.0/24"), Remapped: p("10.245.0.0/24")},
				{Field: "external", Real: p("10.70.0.0/16"), Remapped: p("10.72.0.0/16")},
			}, ""},
		{"status shorter than spec", conf([]CIDR{"10.244.0.0/16", "10.245.0.0/24"}, nil, []CIDR{"10.71.0.0/16"}, nil),
			[]RemoteRange{{Field: "pod", Real: p("10.244.0.0/16"), Remapped: p("10.71.0.0/16")}, {Field: "pod", Index: 1, Real: p("10.245.0.0/24")}}, ""},
		{"bad spec", conf([]CIDR{"10.244.0.1/16"}, nil, nil, nil), nil, "spec.remote.cidr.pod[0] of Configuration liqo-tenant-b/b"},
		{"bad status", conf(nil, []CIDR{"10.70.0.0/16"}, nil, []CIDR{"ten"}), nil, "status.remote.cidr.external[0] of Configuration liqo-tenant-b/b"},
		{"another size", conf([]CIDR{"10.244.0.0/16"}, nil, []CIDR{"10.71.0.0/24"}, nil), nil, "10.71.0.0/24 cannot stand for 10.244.0.0/16"},
	} {
		got, err := tc.conf.RemoteRanges()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestRemappedAddr(t *testing.T) {
	c := &Configuration{}
	c.Name, c.Namespace = "a", "liqo-tenant-a"
	c.Spec.Remote.CIDR = ClusterConfigCIDR{Pod: []CIDR{"10.244.0.0/24"}, External: []CIDR{"10.70.0.0/16"}}
	a := netip.MustParseAddr
	if _, err := c.RemappedAddr(a("10.70.0.1")); err == nil || !strings.Contains(err.Error(), "status.remote.cidr.external[0] not allocated yet") {
		t.Errorf("before allocation: error %v, want one naming status.remote.cidr.external[0]", err)
	}
	c.Status.Remote = &ClusterConfig{CIDR: ClusterConfigCIDR{Pod: []CIDR{"10.71.0.0/24"}, External: []CIDR{"10.73.0.0/16"}}}
	for in, want := range map[string]string{"10.70.0.1": "10.73.0.1", "10.70.2.9": "10.73.2.9", "10.244.0.7": "10.71.0.7"} {
		if got, err := c.RemappedAddr(a(in)); err != nil || got != a(want) {
			t.Errorf("RemappedAddr(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := c.RemappedAddr(a("192.168.1.1")); err == nil || !strings.Contains(err.Error(), "in none of the ranges of spec.remote.cidr") {
		t.Errorf("outside: error %v, want one saying it is in none of the ranges", err)
	}
}

func TestRecordedRanges(t *testing.T) {
	p := netip.MustParsePrefix
	c := &Configuration{}
	if got := c.RecordedRanges(); got != nil {
		t.Errorf("no status: %v, want none", got)
	}
	c.Spec.Remote.CIDR = ClusterConfigCIDR{Pod: []CIDR{"10.244.0.0/16", "bad", "10.246.0.0/16"}, External: []CIDR{"10.70.0.0/16"}}
	c.Status.Remote = &ClusterConfig{CIDR: ClusterConfigCIDR{
		// The second spec entry broke after it was allocated; the third
		// changed size; a fourth is recorded beyond the spec; one status
		// entry is not a network.
		Pod:      []CIDR{"10.71.0.0/16", "10.72.0.0/24", "10.73.0.0/24", "10.74.0.0/16"},
		External: []CIDR{"ten", "10.75.0.0/16"},
	}}
	want := []RemoteRange{
		{Field: "pod", Real: p("10.244.0.0/16"), Remapped: p("10.71.0.0/16")},
		{Field: "pod", Index: 1, Remapped: p("10.72.0.0/24")},
		{Field: "pod", Index: 2, Remapped: p("10.73.0.0/24")},
		{Field: "pod", Index: 3, Remapped: p("10.74.0.0/16")},
		{Field: "external", Index: 1, Remapped: p("10.75.0.0/16")},
	}
	if got := c.RecordedRanges(); !slices.Equal(got, want) {
		t.Errorf("RecordedRanges() = %+v, want %+v", got, want)
	}
}
