// Package netns creates and removes the named network namespaces the lab runs
// its clusters in, each joined to the host by a veth pair, and runs code
// inside one of them (sysctls are per namespace).
//
// It owns the namespace, the veth pair, the addresses and the default route;
// it does not start processes in the namespace (package node does, through
// nsenter) and does not touch the host's own sysctls.
package netns
