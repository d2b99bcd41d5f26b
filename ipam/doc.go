// Package ipam chooses the local ranges under which a peer cluster's CIDRs are
// seen. A peer's range is kept as is only when it lies inside the address
// plan this cluster's admin declared for peers and collides with nothing
// this cluster already uses; otherwise it is remapped to the first free
// block of the same prefix length in the pools of its family (by default
// 10.0.0.0/8, 172.16.0.0/12 and 192.168.0.0/16, searched in that order, for
// IPv4, and fd00::/8 for IPv6). The families are independent: an IPv4 and
// an IPv6 range of one peer are placed each in its own. No range, kept
// or remapped, lands on a taken range or a well-known cloud service address
// (rangepolicy.ServiceAddresses).
//
// The Allocator is pure: it holds the taken ranges in memory, does no I/O and
// gives the same answers for the same sequence of calls. The Ledger on top of
// it remembers which owner holds which ranges for which CIDRs, so that an
// owner's unchanged CIDRs keep their ranges when its list changes. Persisting
// what they hand out, and rebuilding them after a restart (Ledger.Restore), is
// the business of the Configuration reconciler. Translating addresses between a real and a
// remapped range is in internal/cidr.
package ipam
