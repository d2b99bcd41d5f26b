package cluster

import (
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/peerlink/peerlink/internal/choice"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// Default ranges. Every lab cluster uses the same ones unless told
// otherwise: peering clusters whose ranges collide is the case peerlink
// exists for.
var (
	DefaultPodCIDR     = netip.MustParsePrefix("10.244.0.0/16")
	DefaultServiceCIDR = netip.MustParsePrefix("10.96.0.0/16")
	// DefaultPodCIDR6 is the IPv6 twin of DefaultPodCIDR: the pod range of
	// every IPv6 or dual-stack cluster when the clusters share one IPv4
	// layout (PodCIDR6Of gives the distinct ones).
	DefaultPodCIDR6 = netip.MustParsePrefix("fd44::/48")
)

// NodeNetworks6 holds every cluster's IPv6 node network,
// fd30:0:<index>::/64, and ServiceNetworks6 every cluster's IPv6 service
// range, fd96:<index>::/112: a pod range must stay out of both.
const (
	NodeNetworks6    = "fd30:0::/32"
	ServiceNetworks6 = "fd96::/16"
)

// NodeMaskSize6 is the prefix length of each node's part of an IPv6 pod
// range, the usual /64; kube-controller-manager splits a range into at most
// 2^16 parts, so a pod range is /48 or longer.
const NodeMaskSize6 = 64

// indexed is an IPv6 address of the lab's plan whose 16-bit group at
// position group is the cluster index i written in decimal digits, so that
// fd30:0:11:: belongs to cluster 11 as 172.30.11.0/24 does (an index of
// at most 254 is valid hex as written). rest is the low 64 bits.
func indexed(prefix [2]uint16, group int, i int, rest uint64) netip.Addr {
	groups := [8]uint16{prefix[0], prefix[1]}
	var v uint16
	for _, d := range fmt.Sprint(i) {
		v = v<<4 | uint16(d-'0')
	}
	groups[group] = v
	var b [16]byte
	for k, g := range groups[:4] {
		b[2*k], b[2*k+1] = byte(g>>8), byte(g)
	}
	for k := range 8 {
		b[8+k] = byte(rest >> (56 - 8*k))
	}
	return netip.AddrFrom16(b)
}

// PodCIDR6Of is the distinct IPv6 pod range of cluster index i,
// fd44:<i>::/48, for clusters whose pod ranges do not collide.
func PodCIDR6Of(i int) netip.Prefix {
	return netip.PrefixFrom(indexed([2]uint16{0xfd44}, 1, i, 0), 48)
}

// ServiceCIDR6Of is the IPv6 service range of cluster index i,
// fd96:<i>::/112.
func ServiceCIDR6Of(i int) netip.Prefix {
	return netip.PrefixFrom(indexed([2]uint16{0xfd96}, 1, i, 0), 112)
}

// HostIP6 is the host's IPv6 address on the node network of cluster
// index i, fd30:0:<i>::1, beside HostIP.
func HostIP6(i int) netip.Addr { return indexed([2]uint16{0xfd30, 0}, 2, i, 1) }

// IPFamily is the address family of a cluster's Kubernetes objects: its
// Nodes' InternalIPs, its pods and its Services. The node network keeps its
// IPv4 addresses in every family: the lab's registry is reached over it.
type IPFamily string

// The families a cluster can have.
const (
	// IPv4 is the default.
	IPv4 IPFamily = "ipv4"
	// IPv6 is an IPv6-only cluster.
	IPv6 IPFamily = "ipv6"
	// DualStack is a dual-stack cluster, IPv4 first (its primary family).
	DualStack IPFamily = "dual"
)

// ParseIPFamily accepts the names of the IP families.
func ParseIPFamily(s string) (IPFamily, error) {
	return choice.Parse("IP family", s, IPv4, IPv6, DualStack)
}

// HasIPv4 tells whether the family's objects have IPv4 addresses; empty
// means IPv4.
func (f IPFamily) HasIPv4() bool { return f != IPv6 }

// HasIPv6 tells whether the family's objects have IPv6 addresses.
func (f IPFamily) HasIPv6() bool { return f == IPv6 || f == DualStack }

// NodeNetwork holds every cluster's node network, 172.30.<index>.0/24.
const NodeNetwork = "172.30.0.0/16"

// MaxNodes bounds the nodes of one cluster: they take addresses .2 on of
// the cluster's /24, and names that must fit a network interface name.
const MaxNodes = 9

// HostIfPrefix starts the name of every lab interface on the host: the
// bridge of each cluster's node network and the veths of its nodes.
const HostIfPrefix = "plab"

// PauseImage is the sandbox image containerd runs for every pod. The lab
// serves its own build of it under this name.
const PauseImage = "registry.k8s.io/pause:3.10"

// ClusterDomain is the DNS domain of every lab cluster's Services.
const ClusterDomain = "cluster.local"

// ClustersetDomain is the DNS zone of the services imported with the
// Multi-Cluster Services API, which the cluster DNS serves too.
const ClustersetDomain = "clusterset.local"

// CNI is the pod network of a cluster.
type CNI string

// Pod networks the lab sets up.
const (
	// Bridge is the CNI bridge plugin on every node, with the routes
	// between the nodes' pod ranges that a cloud's route table would hold.
	Bridge CNI = "bridge"
	// Flannel is flanneld with its VXLAN backend, run as a DaemonSet.
	Flannel CNI = "flannel"
)

// ParseCNI accepts the names of the pod networks.
func ParseCNI(s string) (CNI, error) {
	return choice.Parse("CNI", s, Bridge, Flannel)
}

// ProxyMode is how kube-proxy programs Services on every node.
type ProxyMode string

// kube-proxy's modes.
const (
	// IPTables is kube-proxy's iptables mode, its default.
	IPTables ProxyMode = "iptables"
	// NFTables is kube-proxy's nftables mode: its own nftables tables,
	// no iptables rules.
	NFTables ProxyMode = "nftables"
	// IPVS is kube-proxy's IPVS mode: the kernel's virtual servers, with
	// iptables and ipsets around them.
	IPVS ProxyMode = "ipvs"
)

// ParseProxyMode accepts the names of kube-proxy's modes.
func ParseProxyMode(s string) (ProxyMode, error) {
	return choice.Parse("kube-proxy mode", s, IPTables, NFTables, IPVS)
}

// CheckKernel tells whether this machine's kernel runs kube-proxy in mode
// m: IPVS needs the kernel's ip_vs, which shows /proc/net/ip_vs once loaded.
func (m ProxyMode) CheckKernel() error {
	if m != IPVS {
		return nil
	}
	if _, err := os.Stat("/proc/net/ip_vs"); err != nil {
		return fmt.Errorf("kube-proxy mode %s: this kernel has no IPVS (no /proc/net/ip_vs): load the ip_vs modules, or use %s or %s", m, IPTables, NFTables)
	}
	return nil
}

// Cluster is one Kubernetes cluster of the lab: its control plane runs on
// its first node, and every node is a network namespace of its own on the
// cluster's node network, a bridge on the host.
type Cluster struct {
	// Index numbers the cluster; it names the namespaces (c<Index> for the
	// first node), the node network (172.30.<Index>.0/24) and the cgroup
	// roots (/k<Index>...).
	Index int
	// Name is the lab's name for the cluster; the nodes and the kubeconfig
	// context are named after it.
	Name string
	// ClusterID is the cluster's identity for peerlink, which peerlink
	// detects once installed (the lab gives it no facts); empty before.
	ClusterID string
	// NodeCount is the number of nodes, 1 to MaxNodes.
	NodeCount int
	// IPFamily is the family of the cluster's Nodes, pods and Services;
	// empty means IPv4.
	IPFamily IPFamily
	// PodCIDR is the cluster's IPv4 pod range, of which each node gets a
	// part; unset in an IPv6-only cluster.
	PodCIDR netip.Prefix
	// PodCIDR6 is the cluster's IPv6 pod range, set in IPv6-only and
	// dual-stack clusters.
	PodCIDR6 netip.Prefix
	// ServiceCIDR is the IPv4 range of the Services' ClusterIPs; unset in an
	// IPv6-only cluster.
	ServiceCIDR netip.Prefix
	// ServiceCIDR6 is the IPv6 range of the Services' ClusterIPs, set in
	// IPv6-only and dual-stack clusters.
	ServiceCIDR6 netip.Prefix
	// CNI is the pod network.
	CNI CNI
	// ProxyMode is kube-proxy's mode on every node; empty means iptables.
	ProxyMode ProxyMode
	// NoNodePodCIDRs leaves the Nodes without spec.podCIDRs, as a CNI with
	// its own IPAM does (Calico's, Cilium's cluster pool, a cloud's VPC
	// CNI): kube-controller-manager allocates no node ranges, and the lab
	// hands each node's bridge its part of PodCIDR itself (NodeRanges).
	// Only the bridge CNI runs so: flanneld reads the Nodes' ranges.
	NoNodePodCIDRs bool
	// Dir holds everything of this cluster: certificates, data, logs, pid
	// files, kubeconfigs.
	Dir string
	// BinDir holds the Kubernetes binaries (bin/k8s/current).
	BinDir string
	// Registry is the host:port of the lab's image registry, reachable
	// from every namespace.
	Registry string
	// Mirrored are the registry hosts containerd resolves through Registry.
	Mirrored []string
	// Logf reports progress.
	Logf func(format string, args ...any)

	// running are the processes Up started, watched while it waits.
	running []*proc.Process
}

// Node is one node of a cluster.
type Node struct {
	Cluster *Cluster
	// Ordinal numbers the node from 1; node 1 runs the control plane.
	Ordinal int
}

// Nodes are the cluster's nodes, the control-plane node first.
func (c *Cluster) Nodes() []*Node {
	out := make([]*Node, c.NodeCount)
	for i := range out {
		out[i] = &Node{Cluster: c, Ordinal: i + 1}
	}
	return out
}

// ControlPlane is the node running etcd, the API server, the controller
// manager and the scheduler.
func (c *Cluster) ControlPlane() *Node { return &Node{Cluster: c, Ordinal: 1} }

// Namespace is the network namespace of the control-plane node.
func (c *Cluster) Namespace() string { return c.ControlPlane().Namespace() }

// Namespace is the network namespace name of the first node of cluster
// index i.
func Namespace(i int) string { return fmt.Sprintf("c%d", i) }

// Namespaces are the network namespaces the nodes of cluster index i can
// have, the first node's first, whatever the number of nodes.
func Namespaces(i int) []string {
	var out []string
	for _, n := range maxNodes(i) {
		out = append(out, n.Namespace())
	}
	return out
}

// maxNodes are all the nodes cluster index i can have.
func maxNodes(i int) []*Node {
	return (&Cluster{Index: i, NodeCount: MaxNodes}).Nodes()
}

// Namespace is the node's network namespace: c<index> for the first node,
// c<index>n<ordinal> for the others.
func (n *Node) Namespace() string {
	if n.Ordinal == 1 {
		return Namespace(n.Cluster.Index)
	}
	return fmt.Sprintf("c%dn%d", n.Cluster.Index, n.Ordinal)
}

// Name is the node's name in Kubernetes: the cluster's name for the first
// node, as a single-node cluster's only node is named, and
// <cluster name>-<ordinal> for the others.
func (n *Node) Name() string {
	if n.Ordinal == 1 {
		return n.Cluster.Name
	}
	return fmt.Sprintf("%s-%d", n.Cluster.Name, n.Ordinal)
}

// IP is the node's address on the node network.
func (n *Node) IP() netip.Addr {
	return netip.AddrFrom4([4]byte{172, 30, byte(n.Cluster.Index), byte(1 + n.Ordinal)})
}

// IP6 is the node's IPv6 address on the node network, fd30:0:<index>::<k>
// beside 172.30.<index>.<k>; it is on the node in IPv6 and dual-stack
// clusters only.
func (n *Node) IP6() netip.Addr {
	return indexed([2]uint16{0xfd30, 0}, 2, n.Cluster.Index, uint64(1+n.Ordinal))
}

// IPs are the node's addresses in Kubernetes (its InternalIPs), of the
// cluster's families, the primary first.
func (n *Node) IPs() []netip.Addr {
	var out []netip.Addr
	if n.Cluster.IPFamily.HasIPv4() {
		out = append(out, n.IP())
	}
	if n.Cluster.IPFamily.HasIPv6() {
		out = append(out, n.IP6())
	}
	return out
}

// HostIf is the host end of the node's veth, enslaved to the bridge.
func (n *Node) HostIf() string {
	return fmt.Sprintf("%s%dn%d", HostIfPrefix, n.Cluster.Index, n.Ordinal)
}

// CgroupName is the cgroup, below every hierarchy's root, that holds the
// node's pods: n<ordinal> inside the cluster's cgroup.
func (n *Node) CgroupName() string {
	return fmt.Sprintf("%s/n%d", CgroupName(n.Cluster.Index), n.Ordinal)
}

// CgroupName is the cgroup, below every hierarchy's root, of cluster index
// i; its nodes' cgroups are inside.
func CgroupName(i int) string { return fmt.Sprintf("k%d", i) }

// BridgeName is the host bridge of the cluster's node network.
func (c *Cluster) BridgeName() string { return BridgeName(c.Index) }

// BridgeName is the host bridge of the node network of cluster index i; the
// veths of its nodes start with the same name.
func BridgeName(i int) string { return fmt.Sprintf("%s%d", HostIfPrefix, i) }

// HostIP is the host's address on the node network of cluster index i.
func HostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{172, 30, byte(i), 1}) }

// NodeNetwork is the cluster's node network.
func (c *Cluster) NodeNetwork() netip.Prefix { return netip.PrefixFrom(HostIP(c.Index), 24).Masked() }

// NodeNetwork6 is the cluster's IPv6 node network, fd30:0:<index>::/64.
func (c *Cluster) NodeNetwork6() netip.Prefix { return netip.PrefixFrom(HostIP6(c.Index), 64).Masked() }

// PodCIDRs are the cluster's pod ranges, one per family, the primary
// first.
func (c *Cluster) PodCIDRs() []netip.Prefix { return c.ofFamilies(c.PodCIDR, c.PodCIDR6) }

// ServiceCIDRs are the cluster's service ranges, one per family, the
// primary first.
func (c *Cluster) ServiceCIDRs() []netip.Prefix { return c.ofFamilies(c.ServiceCIDR, c.ServiceCIDR6) }

// ofFamilies keeps of an IPv4 and an IPv6 value those of the cluster's
// families, IPv4 first.
func (c *Cluster) ofFamilies(v4, v6 netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	if c.IPFamily.HasIPv4() {
		out = append(out, v4)
	}
	if c.IPFamily.HasIPv6() {
		out = append(out, v6)
	}
	return out
}

// LoadBalancerRange is the part of the cluster's node network the lab sets
// aside for a load balancer to announce on it (MetalLB in L2 mode): .240 to
// .254, above every node's address.
func (c *Cluster) LoadBalancerRange() (first, last netip.Addr) {
	return netip.AddrFrom4([4]byte{172, 30, byte(c.Index), 240}), netip.AddrFrom4([4]byte{172, 30, byte(c.Index), 254})
}

// NetworkName is the CNI network name, unique per cluster because
// host-local and the CNI result cache key their files by it.
func (c *Cluster) NetworkName() string { return NetworkName(c.Index) }

// NetworkName is the CNI network name of cluster index i.
func NetworkName(i int) string { return fmt.Sprintf("peerlink-lab-c%d", i) }

// DNSIP is the ClusterIP of the kube-dns Service, the one pods are given:
// the tenth address of the primary service range, as kubeadm gives it.
func (c *Cluster) DNSIP() netip.Addr { return c.DNSIPs()[0] }

// DNSIPs are the kube-dns Service's ClusterIPs, the tenth address of each
// service range, the primary first.
func (c *Cluster) DNSIPs() []netip.Addr {
	var out []netip.Addr
	for _, r := range c.ServiceCIDRs() {
		a := r.Masked().Addr()
		for range 10 {
			a = a.Next()
		}
		out = append(out, a)
	}
	return out
}

// NodeIP is the control-plane node's IPv4 address, where the host reaches
// the API server in every family.
func (c *Cluster) NodeIP() netip.Addr { return c.ControlPlane().IP() }

// AdvertiseIP is the address the API server advertises, the endpoint of
// the kubernetes Service: the control-plane node's address of the primary
// family.
func (c *Cluster) AdvertiseIP() netip.Addr { return c.ControlPlane().IPs()[0] }

// APIServerURL is the API server's address as seen from the host.
func (c *Cluster) APIServerURL() string { return fmt.Sprintf("https://%s:6443", c.NodeIP()) }

// APIServiceIP is the ClusterIP of the kubernetes Service, the first
// address of the primary service range.
func (c *Cluster) APIServiceIP() netip.Addr { return c.APIServiceIPs()[0] }

// APIServiceIPs are the first addresses of the service ranges: the
// kubernetes Service's ClusterIP is the primary one.
func (c *Cluster) APIServiceIPs() []netip.Addr {
	var out []netip.Addr
	for _, r := range c.ServiceCIDRs() {
		out = append(out, r.Masked().Addr().Next())
	}
	return out
}

// NodeMaskSize is the prefix length of each node's part of the pod range:
// /24 where the range has room for a /24 per node, smaller parts otherwise.
func (c *Cluster) NodeMaskSize() int {
	need := c.PodCIDR.Bits() + bits.Len(uint(max(c.NodeCount, 1)-1))
	return max(24, need)
}

// NodeRanges are the parts of PodCIDR the nodes get, in the order of
// Nodes, as kube-controller-manager hands them out to nodes registering in
// that order: consecutive blocks of NodeMaskSize from the start of the range.
// The lab hands them out itself on IPv4 clusters only (NoNodePodCIDRs).
func (c *Cluster) NodeRanges() map[string]netip.Prefix {
	out := map[string]netip.Prefix{}
	block := netip.PrefixFrom(c.PodCIDR.Masked().Addr(), c.NodeMaskSize())
	for _, n := range c.Nodes() {
		out[n.Name()] = block
		block = netip.PrefixFrom(cidr.Last(block).Next(), block.Bits())
	}
	return out
}

// Kubeconfig is the admin kubeconfig of the cluster.
func (c *Cluster) Kubeconfig() string { return c.path("kubeconfig") }

// Log is the log file of a control-plane component.
func (c *Cluster) Log(component string) string { return c.path("logs", component+".log") }

// PidFile is the pid file of a control-plane component.
func (c *Cluster) PidFile(component string) string { return c.path("run", component+".pid") }

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

// Dir holds the node's own files: its containerd, kubelet, CNI
// configuration, logs and pid files.
func (n *Node) Dir() string { return n.Cluster.path("nodes", n.Name()) }

// Log is the log file of one of the node's components.
func (n *Node) Log(component string) string { return n.path("logs", component+".log") }

// PidFile is the pid file of one of the node's components.
func (n *Node) PidFile(component string) string { return n.path("run", component+".pid") }

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.Dir()}, elem...)...)
}
