package route

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// Attributes of an LWTUNNEL_ENCAP_IP or LWTUNNEL_ENCAP_IP6 route
// encapsulation (include/uapi/linux/lwtunnel.h); both families number
// them alike.
const (
	lwtunnelIPID    = 1
	lwtunnelIPDst   = 2
	lwtunnelIPFlags = 6
)

// tunnelCsum is TUNNEL_CSUM (include/uapi/linux/if_tunnel.h): the outer
// UDP header carries a checksum.
const tunnelCsum = 0x01

// ipEncap is the tunnel encapsulation of a route to a link in metadata
// mode (`ip route ... encap ip id VNI dst ADDR`, or `encap ip6 ... csum`
// when ADDR is IPv6). The netlink library has no type for it.
type ipEncap struct {
	id  uint64
	dst netip.Addr
}

var _ netlink.Encap = (*ipEncap)(nil)

func (e *ipEncap) Type() int {
	if e.dst.Is6() {
		return nl.LWTUNNEL_ENCAP_IP6
	}
	return nl.LWTUNNEL_ENCAP_IP
}

func (e *ipEncap) Encode() ([]byte, error) {
	if !e.dst.IsValid() || e.dst.Is4In6() {
		return nil, fmt.Errorf("encap destination %s is not IPv4 or IPv6", e.dst)
	}
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], e.id)
	var b []byte
	b = append(b, nl.NewRtAttr(lwtunnelIPID, id[:]).Serialize()...)
	b = append(b, nl.NewRtAttr(lwtunnelIPDst, e.dst.AsSlice()).Serialize()...)
	if e.dst.Is6() {
		// A VXLAN link drops IPv6 datagrams with a zero UDP checksum
		// unless it was created with udp6zerocsumrx; the tunnel metadata
		// decides whether the sender computes one.
		var flags [2]byte
		binary.BigEndian.PutUint16(flags[:], tunnelCsum)
		b = append(b, nl.NewRtAttr(lwtunnelIPFlags, flags[:]).Serialize()...)
	}
	return b, nil
}

func (e *ipEncap) Decode(buf []byte) error {
	attrs, err := nl.ParseRouteAttr(buf)
	if err != nil {
		return err
	}
	for _, a := range attrs {
		switch a.Attr.Type {
		case lwtunnelIPID:
			if len(a.Value) == 8 {
				e.id = binary.BigEndian.Uint64(a.Value)
			}
		case lwtunnelIPDst:
			if addr, ok := netip.AddrFromSlice(a.Value); ok {
				e.dst = addr
			}
		}
	}
	return nil
}

func (e *ipEncap) String() string {
	if e.dst.Is6() {
		return fmt.Sprintf("ip6 id %d dst %s csum", e.id, e.dst)
	}
	return fmt.Sprintf("ip id %d dst %s", e.id, e.dst)
}

func (e *ipEncap) Equal(o netlink.Encap) bool {
	x, ok := o.(*ipEncap)
	return ok && x.id == e.id && x.dst == e.dst
}
