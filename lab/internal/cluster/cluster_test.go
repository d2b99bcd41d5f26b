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

// TestIPFamilies checks the addresses and ranges of each family and the
// flags that make the components single-stack IPv4 (as before families
// existed), IPv6-only or dual-stack.
func TestIPFamilies(t *testing.T) {
	if got := PodCIDR6Of(11).String() + " " + ServiceCIDR6Of(11).String() + " " + HostIP6(254).String(); got != "fd44:11::/48 fd96:11::/112 fd30:0:254::1" {
		t.Errorf("IPv6 plan of clusters 11 and 254: %s", got)
	}
	v4 := netip.MustParsePrefix("10.244.0.0/16")
	v6 := netip.MustParsePrefix("fd44::/48")
	for _, tc := range []struct {
		family                            IPFamily
		pods, services, nodeIPs, kcmFlags string
	}{
		{IPv4, "10.244.0.0/16", "10.96.0.0/16", "172.30.11.3", "--cluster-cidr=10.244.0.0/16 --node-cidr-mask-size=24"},
		{IPv6, "fd44::/48", "fd96:11::/112", "fd30:0:11::3", "--cluster-cidr=fd44::/48 --node-cidr-mask-size-ipv6=64"},
		{DualStack, "10.244.0.0/16,fd44::/48", "10.96.0.0/16,fd96:11::/112", "172.30.11.3,fd30:0:11::3",
			"--cluster-cidr=10.244.0.0/16,fd44::/48 --node-cidr-mask-size-ipv4=24 --node-cidr-mask-size-ipv6=64"},
	} {
		c := &Cluster{Index: 11, Name: "f", NodeCount: 2, Dir: t.TempDir(), IPFamily: tc.family}
		if tc.family.HasIPv4() {
			c.PodCIDR, c.ServiceCIDR = v4, DefaultServiceCIDR
		}
		if tc.family.HasIPv6() {
			c.PodCIDR6, c.ServiceCIDR6 = v6, ServiceCIDR6Of(11)
		}
		node := c.Nodes()[1]
		if got := Join(c.PodCIDRs()) + " " + Join(c.ServiceCIDRs()) + " " + Join(node.IPs()); got != tc.pods+" "+tc.services+" "+tc.nodeIPs {
			t.Errorf("%s: pods, services, node IPs %s", tc.family, got)
		}
		kcm := strings.Join(c.commands()["kube-controller-manager"], " ")
		if !strings.Contains(kcm, tc.kcmFlags) || !strings.Contains(kcm, "--service-cluster-ip-range="+tc.services) {
			t.Errorf("%s: kube-controller-manager %s, want %s", tc.family, kcm, tc.kcmFlags)
		}
		api := strings.Join(c.commands()["kube-apiserver"], " ")
		if !strings.Contains(api, "--service-cluster-ip-range="+tc.services+" ") || !strings.Contains(api, "--advertise-address="+c.ControlPlane().IPs()[0].String()+" ") {
			t.Errorf("%s: kube-apiserver %s", tc.family, api)
		}
		if kubelet := strings.Join(node.commands()["kubelet"], " "); !strings.Contains(kubelet, "--node-ip="+tc.nodeIPs+" ") {
			t.Errorf("%s: kubelet %s", tc.family, kubelet)
		}
		proxy, err := node.kubeProxyConfig()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(proxy), "clusterCIDR: "+tc.pods+"\n") {
			t.Errorf("%s: kube-proxy configuration\n%s", tc.family, proxy)
		}
	}
}

// TestCNIConfig checks the bridge's host-local ranges and routes: one of
// each per family of the node's pod ranges, in their order.
func TestCNIConfig(t *testing.T) {
	c := &Cluster{Index: 11, Name: "f", NodeCount: 1, Dir: t.TempDir()}
	n := c.Nodes()[0]
	if err := os.MkdirAll(n.path(cniConfDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		subnets []netip.Prefix
		want    []string
	}{
		{[]netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}, []string{`"ranges": [
          [
            {
              "subnet": "10.244.1.0/24"
            }
          ]
        ],`, `"routes": [
          {
            "dst": "0.0.0.0/0"
          }
        ]`}},
		{[]netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd44:0:0:1::/64")}, []string{`"subnet": "10.244.1.0/24"
            }
          ],
          [
            {
              "subnet": "fd44:0:0:1::/64"`, `"dst": "0.0.0.0/0"
          },
          {
            "dst": "::/0"`}},
	} {
		if err := n.writeCNIConfig(tc.subnets, 0); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(n.path(cniConfDir, "10-lab.conflist"))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%v: no\n%s\nin\n%s", tc.subnets, w, b)
			}
		}
	}
}
