// Package ipremap reconciles IPs (ipam.liqo.io/v1alpha1): it gives each
// local address an IP object names an address of this cluster's external
// CIDR, under which the peers reach it, and records it in status.ip and
// status.cidr. The address is persisted in the status only: a restarted
// controller reads it back and keeps it, and deleting the IP frees it.
//
// When an IP has a spec.serviceTemplate it also keeps a Service of the IP's
// name, without a selector, and the EndpointSlice naming the local address
// (service.go), both controlled by the IP.
//
// It does not translate packets: the gateway agents read the IPs and
// program their nftables maps (see dataplane).
package ipremap
