// Package exchange moves export sets between the two gateways of a peering,
// over TCP between their tunnel addresses: inside WireGuard, so the peer's
// WireGuard key is the only identity, and nothing listens anywhere else.
//
// One connection per peering (the client gateway dials the server's tunnel
// address) carries both directions. Each side opens with a hello naming the
// protocol version, sends its whole set as upserts followed by synced, then
// only what changes (upsert, delete) and a ping when idle. Frames are a
// 4-byte big-endian length and a JSON object, at most MaxFrame bytes; a
// frame too large, of an unknown type, or a peer silent longer than Timeout
// ends the connection, and the client dials again. A received service is
// validated (mcs.Service.Validate) and counted against the limits, per
// service and in total (mcs.Tally), in the order it comes; one that fails
// is rejected with the rule it broke and reported, and the rest of the set
// stands. What the peer says of when this side first saw a service
// (mcs.Service.Seen) is dropped: that is this side's to say.
//
// The peer's set is handed over (OnPeer) once complete (after synced) and
// after every change; a connection that ends leaves the last set in place:
// whether the peer's endpoints are reachable is the Connection's to say.
package exchange
