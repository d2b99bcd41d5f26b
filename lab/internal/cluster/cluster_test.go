package cluster

import (
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNodes checks the names and addresses a cluster's nodes take, which
// lab down relies on to find them again, and the ranges derived from the
// cluster's.
func TestNodes(t *testing.T) {
	c := &Cluster{Index: 11, Name: "mx-a", NodeCount: 3, Dir: "/lab/c11",
		PodCIDR: netip.MustParsePrefix("10.244.128.0/17"), ServiceCIDR: netip.MustParsePrefix("10.97.0.0/16")}
	var got [][4]string
	for _, n := range c.Nodes() {
		got = append(got, [4]string{n.Name(), n.Namespace(), n.IP().String(), n.CgroupName()})
	}
	want := [][4]string{
		{"mx-a", "c11", "172.30.11.2", "k11/n1"},
		{"mx-a-2", "c11n2", "172.30.11.3", "k11/n2"},
		{"mx-a-3", "c11n3", "172.30.11.4", "k11/n3"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("nodes %v, want %v", got, want)
	}
	if ns := Namespaces(11); len(ns) != MaxNodes || ns[0] != "c11" || ns[1] != "c11n2" {
		t.Errorf("Namespaces(11) = %v", ns)
	}
	if c.NodeIP() != netip.MustParseAddr("172.30.11.2") || c.NodeNetwork() != netip.MustParsePrefix("172.30.11.0/24") {
		t.Errorf("control plane at %s on %s", c.NodeIP(), c.NodeNetwork())
	}
	if c.APIServiceIP() != netip.MustParseAddr("10.97.0.1") || c.DNSIP() != netip.MustParseAddr("10.97.0.10") {
		t.Errorf("service addresses %s, %s", c.APIServiceIP(), c.DNSIP())
	}
	for _, tc := range []struct {
		pods  string
		nodes int
		want  int
	}{{"10.244.0.0/16", 2, 24}, {"10.244.0.0/24", 1, 24}, {"10.244.0.0/24", 2, 25}, {"10.244.0.0/24", 3, 26}, {"10.244.128.0/17", 9, 24}} {
		c := &Cluster{PodCIDR: netip.MustParsePrefix(tc.pods), NodeCount: tc.nodes}
		if got := c.NodeMaskSize(); got != tc.want {
			t.Errorf("NodeMaskSize of %s for %d nodes = /%d, want /%d", tc.pods, tc.nodes, got, tc.want)
		}
	}
	ranges := (&Cluster{Name: "r", PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), NodeCount: 3}).NodeRanges()
	if want := map[string]netip.Prefix{"r": netip.MustParsePrefix("10.244.0.0/26"), "r-2": netip.MustParsePrefix("10.244.0.64/26"),
		"r-3": netip.MustParsePrefix("10.244.0.128/26")}; !maps.Equal(ranges, want) {
		t.Errorf("NodeRanges of 10.244.0.0/24 for 3 nodes = %v, want %v", ranges, want)
	}
	if _, err := ParseCNI("calico"); err == nil {
		t.Error("ParseCNI accepted calico")
	}
}

// TestProxyMode parses kube-proxy's modes and refuses IPVS on a kernel
// without it, saying what is missing.
func TestProxyMode(t *testing.T) {
	for _, s := range []string{"iptables", "nftables", "ipvs"} {
		m, err := ParseProxyMode(s)
		if err != nil || string(m) != s {
			t.Errorf("ParseProxyMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseProxyMode("userspace"); err == nil || !strings.Contains(err.Error(), "nftables") {
		t.Errorf("ParseProxyMode(userspace) = %v, want an error listing the modes", err)
	}
	for _, m := range []ProxyMode{IPTables, NFTables} {
		if err := m.CheckKernel(); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
	_, statErr := os.Stat("/proc/net/ip_vs")
	err := IPVS.CheckKernel()
	if (statErr == nil) != (err == nil) || (err != nil && !strings.Contains(err.Error(), "/proc/net/ip_vs")) {
		t.Errorf("IPVS.CheckKernel() = %v with /proc/net/ip_vs: %v", err, statErr)
	}
}

// TestReadEnvFile reads a subnet file as flanneld writes it.
func TestReadEnvFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.env")
	data := "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := readEnvFile(path)
	if err != nil || env["FLANNEL_SUBNET"] != "10.244.1.1/24" || env["FLANNEL_MTU"] != "1450" || len(env) != 4 {
		t.Errorf("readEnvFile = %v, %v", env, err)
	}
}
