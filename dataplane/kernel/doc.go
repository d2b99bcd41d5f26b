// Package kernel is the stage of the gateway and fabric agents that writes
// a plan into the network namespace the agent runs in. The stage opens the
// route and nftables appliers once, resolves the overlay encapsulation, and
// on each sync writes a gateway's WireGuard link, then the overlay link,
// the routing and the nftables tables (family ip, then ip6, removed when
// the plan has none), in that order (each part names what the one before
// made), each compared with the kernel first; it logs what it changed in
// one line, and on exit removes what a plan owns.
//
// It does not gather facts nor plan (the agents and package dataplane do,
// the options both agents take are dataplane.AgentOptions), and it does not
// run the WireGuard device (package wireguard does, for the gateway agent).
package kernel
