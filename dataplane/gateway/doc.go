// Package gateway is the gateway agent: the process of a gateway pod, in the
// pod's network namespace. It watches its GatewayServer or GatewayClient, the
// Configuration and the PublicKey of its peer (all in its namespace, found
// by the peer's liqo.io/remote-cluster-id label) and the IPs of every
// namespace (the hosts this cluster remaps, ips.go), reads its own key from the
// mounted key Secret, plans the pod's kernel state with dataplane.PlanGateway
// and applies it through the kernel stage of package kernel: the WireGuard
// link peerlink-tunnel, the overlay link to the nodes, routes and rules, and
// the nftables table. It re-applies within a second whatever changes under
// it (a deleted link, a flushed table, a removed route), writing nothing when
// nothing changed.
//
// It also measures the tunnel (package health), keeps the Connection
// gw-<gateway> up to date, exports Prometheus metrics, and on SIGTERM removes
// what it created. Nothing is configured until the peer's public key is
// known. It runs the dataplane half of a key rotation (rotation.go): the
// switch to its own next key once the peer accepts it, and the retirement
// of the peer's old key once its next key carries the tunnel.
//
// The Agent is a supervisor: its goroutine syncs on every change and runs
// the events of its parts, each a type of its own: the facts of the plan
// (facts.go), the pod's network namespace (network.go), the Lease election
// and the active label (election.go), the key rotation (rotation.go), the
// health prober (probe.go), the Connection (connection.go), the service
// exchange (services.go) and the metrics (metrics.go).
//
// It does not create the gateway's Deployment, Service, RBAC or keys (the
// controller does), nor plan anything itself (package dataplane does), nor
// open the WireGuard device (wireguard.Link does).
package gateway
