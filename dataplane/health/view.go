package health

import (
	"errors"
	"fmt"
	"net/netip"
)

// A Mapping is one range of the side that receives a view announcement
// (Range) and the range the announcing side reaches it at (SeenAs): equal
// when the announcing side routes it as it is, of the same size when it
// remaps it.
type Mapping struct {
	Range, SeenAs netip.Prefix
}

// MaxView bounds the mappings of one view announcement: a Configuration
// holds at most 64 pod and 64 external ranges, but a cluster with more than
// a few is rare, and one announcement must fit in a tunnel packet of the
// smallest MTU (32 IPv6 mappings take 1,102 bytes with the header).
const MaxView = 32

// A view announcement is the header (its nonce unused), a count, and per
// mapping: the address family (4 or 6), the prefix length both prefixes
// share, the address of Range, the address of SeenAs. It follows each ping
// while the sender has a view, and is not answered.
const kindView = 8

// viewAnnouncement encodes view, at most MaxView mappings of one family and
// one length each.
func viewAnnouncement(view []Mapping) ([]byte, error) {
	if len(view) > MaxView {
		return nil, fmt.Errorf("%d mappings, at most %d fit an announcement", len(view), MaxView)
	}
	b := append(packet(kindView, 0), byte(len(view)))
	for _, m := range view {
		if err := checkMapping(m); err != nil {
			return nil, err
		}
		fam := byte(6)
		if m.Range.Addr().Is4() {
			fam = 4
		}
		b = append(b, fam, byte(m.Range.Bits()))
		b = append(b, m.Range.Addr().AsSlice()...)
		b = append(b, m.SeenAs.Addr().AsSlice()...)
	}
	return b, nil
}

// checkMapping refuses a mapping whose prefixes are not networks of one
// family and one size.
func checkMapping(m Mapping) error {
	switch {
	case !m.Range.IsValid() || !m.SeenAs.IsValid():
		return errors.New("a mapping without both ranges")
	case m.Range != m.Range.Masked() || m.SeenAs != m.SeenAs.Masked():
		return fmt.Errorf("%s seen as %s: not networks", m.Range, m.SeenAs)
	case m.Range.Addr().Is4() != m.SeenAs.Addr().Is4() || m.Range.Bits() != m.SeenAs.Bits():
		return fmt.Errorf("%s seen as %s: another family or size", m.Range, m.SeenAs)
	}
	return nil
}

// parseView decodes the mappings of a view announcement, b past its
// header. Anything but the exact encoding of at most MaxView valid
// mappings is an error: the peer's words are never taken in part.
func parseView(b []byte) ([]Mapping, error) {
	if len(b) < 1 {
		return nil, errors.New("no count")
	}
	n := int(b[0])
	if n > MaxView {
		return nil, fmt.Errorf("%d mappings, at most %d", n, MaxView)
	}
	b = b[1:]
	view := make([]Mapping, 0, n)
	for range n {
		if len(b) < 2 {
			return nil, errors.New("a mapping cut short")
		}
		size := 4
		switch b[0] {
		case 4:
		case 6:
			size = 16
		default:
			return nil, fmt.Errorf("address family %d", b[0])
		}
		bits := int(b[1])
		if len(b) < 2+2*size {
			return nil, errors.New("a mapping cut short")
		}
		a, _ := netip.AddrFromSlice(b[2 : 2+size])
		s, _ := netip.AddrFromSlice(b[2+size : 2+2*size])
		m := Mapping{Range: netip.PrefixFrom(a, bits), SeenAs: netip.PrefixFrom(s, bits)}
		if err := checkMapping(m); err != nil {
			return nil, err
		}
		view = append(view, m)
		b = b[2+2*size:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes past the last mapping", len(b))
	}
	return view, nil
}
