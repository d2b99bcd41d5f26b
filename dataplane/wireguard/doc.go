// Package wireguard owns the WireGuard device of a gateway: one small facade,
// Device, over two back-ends that are chosen at run time. The kernel back-end
// creates a link of type wireguard; the userspace back-end runs the embedded
// wireguard-go on a TUN device and serves the standard UAPI socket under
// /var/run/wireguard, so that `wg show` and wgctrl see both alike.
//
// Link keeps the device of one link name open across repairs: it takes over
// the link of an earlier release's name, opens the device again when its
// link was deleted under it, and on Close deletes the link, whichever run
// made it.
//
// Desired configuration is data (plan.WireGuard, whose keys convert to
// wgctrl's here and nowhere else); Sync compares it with what the device
// reports and writes only the difference, never overwriting an endpoint the
// device learned from a roaming peer when the plan names none.
//
// A peer may be known under two keys while it rotates its key pair
// (plan.WireGuardPeer.NextPublicKey): both are peers of the device, and the
// allowed IPs belong to one of them. The userspace device moves them to the
// other key on the handshake that starts a session with it (followBind);
// a kernel device cannot, and the gateway agent moves them after the fact
// (MoveAllowedIPs).
//
// It does not own addresses, routes or the link's MTU after creation (package
// route does), nor the choice of keys and peers (package dataplane plans
// them).
package wireguard
