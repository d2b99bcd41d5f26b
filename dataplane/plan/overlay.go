package plan

import (
	"crypto/sha256"
	"net"
	"net/netip"
)

// OverlayKind is the encapsulation of the overlay.
type OverlayKind string

// Encapsulations.
const (
	Geneve OverlayKind = "geneve"
	VXLAN  OverlayKind = "vxlan"
)

// Ports and identifiers of the overlay.
const (
	// GenevePort is the Geneve UDP port: not 6081, which CNIs use.
	GenevePort = 6091
	// VXLANPort is the VXLAN UDP port: not 4789 nor 8472, which CNIs use.
	VXLANPort = 4790
	// VNI is the tunnel identifier written on every overlay packet. A link
	// in metadata mode accepts any VNI; a fixed one keeps captures readable.
	VNI = 6091
)

// Port is the UDP port of the kind.
func (k OverlayKind) Port() int {
	if k == Geneve {
		return GenevePort
	}
	return VXLANPort
}

// OverlayMAC is the MAC address of the overlay link of the host whose
// underlay address is ip: locally administered, unicast, 02:50 followed by
// the four bytes of an IPv4 address (IPv4-mapped ones too), or 02:51
// followed by the first four bytes of the SHA-256 of the sixteen bytes of
// an IPv6 address: its low bytes, the host's own, recur across prefixes
// (::1 of every subnet), its high bytes across the hosts of one. Senders
// write it as a permanent neighbor, so the overlay never needs ARP nor
// neighbor discovery.
func OverlayMAC(ip netip.Addr) net.HardwareAddr {
	if FamilyOf(ip) == IPv6 {
		sum := sha256.Sum256(ip.AsSlice())
		return net.HardwareAddr{0x02, 0x51, sum[0], sum[1], sum[2], sum[3]}
	}
	a := ip.Unmap().As4()
	return net.HardwareAddr{0x02, 0x50, a[0], a[1], a[2], a[3]}
}

// Overlay is the desired overlay link of a network namespace.
type Overlay struct {
	// Name of the link.
	Name string
	// Kind of encapsulation.
	Kind OverlayKind
	// Underlay is the address peers send overlay packets to; it names the
	// link's MAC address.
	Underlay netip.Addr
}
