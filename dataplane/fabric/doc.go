// Package fabric is the fabric agent: one process per node, in the node's
// network namespace. It watches the active gateway pods of the cluster, the
// Configurations of their peers, the IPs of every namespace and the
// cluster's own ranges (the cluster-info
// ConfigMap, package clusterinfo), plans the node's kernel state with
// dataplane.PlanFabric and applies it through the kernel stage of package
// agent: the node's overlay link, one route per remote range in peerlink's
// tables (one longest-prefix-match lookup per packet, whatever the number of
// peers), two policy rules, and an nftables table whose sets keep pod sources
// intact towards peers, send other sources out as the cluster's
// unknown-source address, and masquerade what peers send the remapped hosts
// whose IP asks for it. It re-applies within a second whatever changes
// under it. On SIGTERM it leaves all of it for the next agent, or removes it
// when told to clean up on exit.
//
// It does not run gateways (package gateway) nor plan (package dataplane).
package fabric
