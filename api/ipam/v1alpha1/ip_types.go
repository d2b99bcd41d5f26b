package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// MaxIPs bounds the IP objects a cluster remaps: the controller allocates
// no address beyond it and a gateway programs no more, so that what the
// gateway's nftables maps and sets hold stays bounded (peerlink).
const MaxIPs = 1024

// EndpointSliceManager is the endpointslice.kubernetes.io/managed-by value
// of the EndpointSlice made for an IP's serviceTemplate (peerlink).
const EndpointSliceManager = "ipam.peerlink.io"

// Reasons of the conditions of an IP (peerlink).
const (
	// ReasonInvalidIP: spec.ip is no IPv4 address a peer may be given, or
	// lies in this cluster's pod or external CIDR.
	ReasonInvalidIP = "InvalidIP"
	// ReasonNetworkRefUnsupported: spec.networkRef names a network;
	// peerlink allocates in the external CIDR only.
	ReasonNetworkRefUnsupported = "NetworkRefUnsupported"
	// ReasonExhausted: the external CIDR has no free address, or MaxIPs
	// are allocated.
	ReasonExhausted = "Exhausted"
)

// ServiceTemplate is the Service (and its EndpointSlice) to create for a
// remapped address.
type ServiceTemplate struct {
	// Metadata of the Service.
	// +optional
	Metadata metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec of the Service.
	// +optional
	Spec corev1.ServiceSpec `json:"spec,omitempty"`
}

// IPSpec names a local address to remap.
type IPSpec struct {
	// IP is the local address: a host outside the pod network that this
	// cluster's nodes reach.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="IP field is immutable"
	IP netv1beta1.IP `json:"ip"`
	// NetworkRef names the network to allocate the address from; empty
	// means the external CIDR, the only one peerlink allocates from.
	// +optional
	NetworkRef *corev1.ObjectReference `json:"networkRef,omitempty"`
	// ServiceTemplate, when set, asks for a Service named as the IP, with
	// the template's metadata and spec but no selector, and its
	// EndpointSlice naming the local address: this cluster's pods then
	// reach the host by a name.
	// +optional
	ServiceTemplate *ServiceTemplate `json:"serviceTemplate,omitempty"`
	// Masquerade makes the node that forwards the peers' packets to the
	// host (the node of the gateway pod) give them its own address as
	// source, so that the host answers the node whatever its routes;
	// absent or false, the host sees the peer's pod under this cluster's
	// view of it and must route that back to the node.
	// +optional
	Masquerade *bool `json:"masquerade,omitempty"`
}

// IPStatus reports the address the local one is remapped to.
type IPStatus struct {
	netv1beta1.CommonStatus `json:",inline"`
	// IP is the address of the external CIDR the local one is reached at.
	// +optional
	IP netv1beta1.IP `json:"ip,omitempty"`
	// CIDR is the network IP is allocated from: the external CIDR.
	// +optional
	CIDR netv1beta1.CIDR `json:"cidr,omitempty"`
}

// IP remaps a local address outside the pod network into this cluster's
// external CIDR, where the peers reach it through the tunnel.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=liqo
// +kubebuilder:printcolumn:name="Local IP",type=string,JSONPath=`.spec.ip`
// +kubebuilder:printcolumn:name="Remapped IP",type=string,JSONPath=`.status.ip`
// +kubebuilder:printcolumn:name="Remapped IP CIDR",type=string,JSONPath=`.status.cidr`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPSpec   `json:"spec"`
	Status IPStatus `json:"status,omitempty"`
}

// IPList is a list of IP.
//
// +kubebuilder:object:root=true
type IPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IP `json:"items"`
}
