package route

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// Attributes of an LWTUNNEL_ENCAP_IP route encapsulation
// (include/uapi/linux/lwtunnel.h).
const (
	lwtunnelIPID  = 1
	lwtunnelIPDst = 2
)

// ipEncap is the IPv4 tunnel encapsulation of a route to a link in
// metadata mode (`ip route ... encap ip id VNI dst ADDR`). The netlink
// library has no type for it.
type ipEncap struct {
	id  uint64
	dst netip.Addr
}

var _ netlink.Encap = (*ipEncap)(nil)

func (e *ipEncap) Type() int { return nl.LWTUNNEL_ENCAP_IP }

func (e *ipEncap) Encode() ([]byte, error) {
	if !e.dst.Is4() {
		return nil, fmt.Errorf("encap destination %s is not IPv4", e.dst)
	}
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], e.id)
	dst := e.dst.As4()
	var b []byte
	b = append(b, nl.NewRtAttr(lwtunnelIPID, id[:]).Serialize()...)
	b = append(b, nl.NewRtAttr(lwtunnelIPDst, dst[:]).Serialize()...)
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

func (e *ipEncap) String() string { return fmt.Sprintf("ip id %d dst %s", e.id, e.dst) }

func (e *ipEncap) Equal(o netlink.Encap) bool {
	x, ok := o.(*ipEncap)
	return ok && x.id == e.id && x.dst == e.dst
}
