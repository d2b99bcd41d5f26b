// Package v1alpha1 holds the Go types of the ipam.liqo.io/v1alpha1 kinds
// peerlink serves: IP, a local address outside the pod network (a VM, a
// database, a node's service) given an address of this cluster's external
// CIDR, under which the peers reach it through the tunnel.
//
// The field names, JSON names and printer columns follow the Liqo project's
// IP kind, so that its manifests apply unchanged; the status additionally
// carries kstatus conditions and observedGeneration. It owns the types and
// their schema, not the allocation (reconciler/ipremap) nor the translation
// (the gateway's plan in dataplane). The package imports nothing of peerlink
// but the networking.liqo.io/v1beta1 scalars.
//
// +kubebuilder:object:generate=true
// +groupName=ipam.liqo.io
package v1alpha1
