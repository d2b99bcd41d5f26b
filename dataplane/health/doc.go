// Package health measures a tunnel from its inside: each gateway answers
// UDP pings on its tunnel address and pings the peer's at a fixed interval,
// so a reply proves that keys, routes and NAT work end to end, not only that
// WireGuard completed a handshake. A Prober reports, after each interval,
// whether the tunnel is Connecting (never answered), Connected (answered,
// with the round-trip time) or in Error (a number of pings in a row
// unanswered).
//
// With its pings a prober also announces the peer's keys its side accepts
// besides the current one (a key rotation: "I accept your key K"), and
// reports those the peer announced. Only the peer's tunnel address is
// heard, so only what is already inside the tunnel can announce. It
// announces its side's tunnel MTU the same way, after each ping, and
// reports the MTU the peer announced: zero while unknown (a peer of an
// earlier release announces none), never a value outside the API's bounds.
// A server announces, the same way, where it is reachable from outside its
// cluster (Endpoint), so that its client can follow when that moves.
//
// It does not write the Connection object nor export metrics (the gateway
// agent does, from the reports).
package health
