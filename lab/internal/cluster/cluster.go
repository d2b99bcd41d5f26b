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
)

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
	// PodCIDR is the cluster's pod range, of which each node gets a part.
	PodCIDR netip.Prefix
	// ServiceCIDR is the range of the Services' ClusterIPs.
	ServiceCIDR netip.Prefix
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

// DNSIP is the ClusterIP of the kube-dns Service: the tenth address of the
// service range, as kubeadm gives it.
func (c *Cluster) DNSIP() netip.Addr {
	a := c.ServiceCIDR.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a
}

// NodeIP is the control-plane node's address, where the API server listens.
func (c *Cluster) NodeIP() netip.Addr { return c.ControlPlane().IP() }

// APIServerURL is the API server's address as seen from the host.
func (c *Cluster) APIServerURL() string { return fmt.Sprintf("https://%s:6443", c.NodeIP()) }

// APIServiceIP is the ClusterIP of the kubernetes Service, the first
// address of the service range.
func (c *Cluster) APIServiceIP() netip.Addr { return c.ServiceCIDR.Masked().Addr().Next() }

// NodeMaskSize is the prefix length of each node's part of the pod range:
// /24 where the range has room for a /24 per node, smaller parts otherwise.
func (c *Cluster) NodeMaskSize() int {
	need := c.PodCIDR.Bits() + bits.Len(uint(max(c.NodeCount, 1)-1))
	return max(24, need)
}

// NodeRanges are the parts of PodCIDR the nodes get, in the order of
// Nodes, as kube-controller-manager hands them out to nodes registering in
// that order: consecutive blocks of NodeMaskSize from the start of the range.
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
