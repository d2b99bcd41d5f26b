package node

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/peerlink/peerlink/internal/testenv/netns"
)

// Pod and service ranges. Every lab cluster uses the same ones on purpose:
// peering clusters whose ranges collide is the case peerlink exists for.
const (
	PodCIDR     = "10.244.0.0/24"
	ServiceCIDR = "10.96.0.0/16"
	// NodeNetwork holds every cluster's veth subnet, 172.30.<index>.0/24.
	NodeNetwork = "172.30.0.0/16"
	// APIServiceIP is the ClusterIP of the kubernetes Service, the first
	// address of ServiceCIDR.
	APIServiceIP = "10.96.0.1"
)

// HostIfPrefix starts the name of every lab veth on the host side.
const HostIfPrefix = "plab"

// PauseImage is the sandbox image containerd runs for every pod. The lab
// serves its own build of it under this name.
const PauseImage = "registry.k8s.io/pause:3.10"

// Node is one single-node Kubernetes cluster of the lab, living in network
// namespace c<Index> with node address 172.30.<Index>.2.
type Node struct {
	// Index numbers the cluster; it names the namespace (c<Index>), the
	// veth subnet (172.30.<Index>.0/24) and the cgroup root (/k<Index>).
	Index int
	// ClusterID is the cluster's identity for peerlink; the node is named
	// after it.
	ClusterID string
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
}

// Namespace is the name of the cluster's network namespace.
func (n *Node) Namespace() string { return Namespace(n.Index) }

// Namespace is the network namespace name of cluster index i.
func Namespace(i int) string { return fmt.Sprintf("c%d", i) }

// CgroupName is the cgroup, below every hierarchy's root, that holds the
// cluster's pods.
func (n *Node) CgroupName() string { return CgroupName(n.Index) }

// CgroupName is the cgroup root name of cluster index i.
func CgroupName(i int) string { return fmt.Sprintf("k%d", i) }

// NetworkName is the CNI network name, unique per cluster because
// host-local and the CNI result cache key their files by it.
func (n *Node) NetworkName() string { return NetworkName(n.Index) }

// NetworkName is the CNI network name of cluster index i.
func NetworkName(i int) string { return fmt.Sprintf("peerlink-lab-c%d", i) }

// Pair is the namespace and its veth pair.
func (n *Node) Pair() netns.Pair { return Pair(n.Index) }

// Pair is the namespace and veth pair of cluster index i.
func Pair(i int) netns.Pair {
	return netns.Pair{
		Namespace: Namespace(i),
		HostIf:    fmt.Sprintf("%s%d", HostIfPrefix, i),
		HostAddr:  netip.PrefixFrom(HostIP(i), 24),
		NodeAddr:  netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 30, byte(i), 2}), 24),
	}
}

// HostIP is the host's address on the veth of cluster index i.
func HostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{172, 30, byte(i), 1}) }

// NodeIP is the node's address, where the API server and NodePorts listen.
func (n *Node) NodeIP() netip.Addr { return n.Pair().NodeAddr.Addr() }

// NodeName is the name of the cluster's only node.
func (n *Node) NodeName() string { return n.ClusterID }

// APIServerURL is the API server's address as seen from the host.
func (n *Node) APIServerURL() string { return fmt.Sprintf("https://%s:6443", n.NodeIP()) }

// Kubeconfig is the admin kubeconfig of the cluster.
func (n *Node) Kubeconfig() string { return n.path("kubeconfig") }

// Log is the log file of a component.
func (n *Node) Log(component string) string { return n.path("logs", component+".log") }

// PidFile is the pid file of a component.
func (n *Node) PidFile(component string) string { return n.path("run", component+".pid") }

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.Dir}, elem...)...)
}
