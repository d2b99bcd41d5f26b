// Package testbed builds two peered clusters out of network namespaces, for
// the dataplane's end-to-end tests and benchmarks. Each side has a node
// namespace (where the fabric agent runs, as on a node's host network), a
// gateway pod namespace (where the gateway agent runs) and pod namespaces,
// and a second node with a fabric agent of its own and one pod, routed to
// the first node as a CNI routes between nodes; both sides use the same pod
// CIDR, and the two gateway namespaces are joined by a veth standing for the
// internet. Dual-stack sides (Remaps with IPv6 ranges) have the same IPv6
// pod CIDR too, over the same IPv4 nodes and overlay; the internet link may
// be IPv6-only (IPv6Endpoint).
//
// The agents are the real peerlink-agent binary, built and started in their
// namespace as a pod's container runs (testkit/testenv/proc), against the
// API server of their side. An API server of the test control plane listens
// on the host's loopback, which a process in another network namespace
// cannot reach; the testbed therefore listens on 127.0.0.1 inside each
// agent's namespace (a socket opened from a thread that entered it) and
// splices every connection to the API server on the host's loopback. The agent's kubeconfig names 127.0.0.1, which the API
// server's certificate covers, so TLS is verified as usual and nothing of
// the test network is exposed on the host.
//
// It also writes the objects the controller would have made for each side
// (gateway, Configuration with its remapped status, the peer's PublicKey, the
// gateway pod, the cluster-info ConfigMap) and the gateway's key files.
//
// The benchmark's bare paths (BareVeth, BareWireGuard, PodsOverWireGuard,
// FabricNode) are built here too; command wgbare is their bare WireGuard.
//
// It is test machinery, outside the product tree: no product package
// imports it; its own tests and the benchmarks (bench) do.
package testbed
