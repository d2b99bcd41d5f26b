package labctl

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/peerlink/peerlink/lab/internal/cluster"
)

// stateFile records, before anything else is created, what a lab is made of,
// so that down and status work on a lab that came up only halfway.
const stateFile = "lab.json"

// State is the record of one lab.
type State struct {
	// Repo is the repository the lab was built from.
	Repo     string `json:"repo"`
	Registry string `json:"registry"`
	// Kubernetes is the release every cluster runs, the name of its
	// directory of binaries in bin/k8s (v1.N.P).
	Kubernetes string    `json:"kubernetes,omitempty"`
	Clusters   []Cluster `json:"clusters"`
	// LoadBalancer is the load balancer every cluster runs, if any; the
	// lab's peerings then expose gateway servers with the default
	// Service type, LoadBalancer.
	LoadBalancer LoadBalancer `json:"loadBalancer,omitempty"`
}

// Cluster is one cluster of a lab.
type Cluster struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	// ID is peerlink's cluster ID, detected by peerlink once installed.
	ID string `json:"id,omitempty"`
	// Kubeconfig is the admin kubeconfig, whose server is the address of
	// the control-plane node.
	Kubeconfig string            `json:"kubeconfig"`
	Nodes      int               `json:"nodes"`
	CNI        cluster.CNI       `json:"cni"`
	ProxyMode  cluster.ProxyMode `json:"proxyMode,omitempty"`
	// IPFamily is the family of the cluster's Kubernetes objects; a lab
	// recorded before there was a choice is IPv4.
	IPFamily cluster.IPFamily `json:"ipFamily,omitempty"`
	// NoNodePodCIDRs: the Nodes have no spec.podCIDRs.
	NoNodePodCIDRs bool `json:"noNodePodCIDRs,omitempty"`
	// PodCIDR and ServiceCIDR are the IPv4 ranges (none in an IPv6-only
	// cluster), PodCIDR6 and ServiceCIDR6 the IPv6 ones.
	PodCIDR      netip.Prefix `json:"podCIDR,omitzero"`
	ServiceCIDR  netip.Prefix `json:"serviceCIDR,omitzero"`
	PodCIDR6     netip.Prefix `json:"podCIDR6,omitzero"`
	ServiceCIDR6 netip.Prefix `json:"serviceCIDR6,omitzero"`
}

// recordOf is the record of a cluster.
func recordOf(c *cluster.Cluster) Cluster {
	return Cluster{Index: c.Index, Name: c.Name, ID: c.ClusterID, Kubeconfig: c.Kubeconfig(), Nodes: c.NodeCount,
		CNI: c.CNI, ProxyMode: c.ProxyMode, IPFamily: c.IPFamily, NoNodePodCIDRs: c.NoNodePodCIDRs,
		PodCIDR: c.PodCIDR, ServiceCIDR: c.ServiceCIDR, PodCIDR6: c.PodCIDR6, ServiceCIDR6: c.ServiceCIDR6}
}

// cluster is the cluster a record describes, without what the lab adds
// (directories, binaries, registry).
func (r Cluster) cluster() *cluster.Cluster {
	return &cluster.Cluster{Index: r.Index, Name: r.Name, ClusterID: r.ID, NodeCount: r.Nodes, CNI: r.CNI, ProxyMode: r.ProxyMode,
		IPFamily: cmp.Or(r.IPFamily, cluster.IPv4), NoNodePodCIDRs: r.NoNodePodCIDRs,
		PodCIDR: r.PodCIDR, ServiceCIDR: r.ServiceCIDR, PodCIDR6: r.PodCIDR6, ServiceCIDR6: r.ServiceCIDR6}
}

func writeState(dir string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lab directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	return nil
}

// ReadState reads the record of the lab in dir; os.ErrNotExist means there
// is none.
func ReadState(dir string) (State, error) {
	var s State
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("lab state %s: %w", filepath.Join(dir, stateFile), err)
	}
	return s, nil
}

func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
