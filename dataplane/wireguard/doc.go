// Package wireguard owns the WireGuard device of a gateway: one small facade,
// Device, over two back-ends that are chosen at run time. The kernel back-end
// creates a link of type wireguard; the userspace back-end runs the embedded
// wireguard-go on a TUN device and serves the standard UAPI socket under
// /var/run/wireguard, so that `wg show` and wgctrl see both alike.
//
// Desired configuration is data (plan.WireGuard, whose keys convert to
// wgctrl's here and nowhere else); Sync compares it with what the device
// reports and writes only the difference, never overwriting an endpoint the
// device learned from a roaming peer when the plan names none.
//
// It does not own addresses, routes or the link's MTU after creation (package
// route does), nor the choice of keys and peers (package dataplane plans
// them).
package wireguard
