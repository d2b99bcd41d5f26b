package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionNetworkCIDRsConfigured is True when every remote CIDR of a
// Configuration has its local (possibly remapped) counterpart in status.
const ConditionNetworkCIDRsConfigured = "NetworkCIDRsConfigured"

// MaxCIDRs bounds each list of CIDRs of a cluster (pod, external), as the
// CRD's maxItems and the CLI's validation enforce it: a peer's ranges
// become routes on every node and set elements in every gateway, and no
// real cluster has more than a few of each (peerlink).
const MaxCIDRs = 64

// ClusterConfigCIDR lists the CIDRs of one cluster.
type ClusterConfigCIDR struct {
	// Pod are the pod CIDRs of the cluster.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Pod []CIDR `json:"pod"`
	// External are the CIDRs used for endpoints outside the pod network; the
	// first address of the first one is the unknown-source address.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	External []CIDR `json:"external,omitempty"`
}

// ClusterConfig describes the network of one cluster.
type ClusterConfig struct {
	// CIDR lists the cluster's ranges.
	CIDR ClusterConfigCIDR `json:"cidr"`
}

// ConfigurationSpec declares the network of the peer cluster.
type ConfigurationSpec struct {
	// Local is the network of this cluster; the controller may fill it.
	// +optional
	Local *ClusterConfig `json:"local,omitempty"`
	// Remote is the real network of the peer cluster.
	Remote ClusterConfig `json:"remote"`
}

// ConfigurationStatus reports how this cluster sees the peer's network.
type ConfigurationStatus struct {
	CommonStatus `json:",inline"`
	// Remote holds the peer's CIDRs as seen from this cluster, remapped where
	// they collide with local ranges; index-aligned with spec.remote.
	// +optional
	Remote *ClusterConfig `json:"remote,omitempty"`
}

// Configuration declares the network of a peer cluster and reports how it is
// remapped into this cluster.
//
// The printer columns are Liqo's, in its order and under its names (the
// first one ends in a space there too), so that tables read and parse alike.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=conf,categories=liqo
// +kubebuilder:printcolumn:name="Desired Pod CIDR ",type=string,JSONPath=`.spec.remote.cidr.pod`
// +kubebuilder:printcolumn:name="Remapped Pod CIDR",type=string,JSONPath=`.status.remote.cidr.pod`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Desired External CIDR",type=string,JSONPath=`.spec.remote.cidr.external`,priority=1
// +kubebuilder:printcolumn:name="Remapped External CIDR",type=string,JSONPath=`.status.remote.cidr.external`,priority=1
// +kubebuilder:printcolumn:name="ClusterID",type=string,JSONPath=`.metadata.labels.liqo\.io/remote-cluster-id`,priority=1
type Configuration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConfigurationSpec   `json:"spec"`
	Status ConfigurationStatus `json:"status,omitempty"`
}

// ConfigurationList is a list of Configuration.
//
// +kubebuilder:object:root=true
type ConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Configuration `json:"items"`
}
