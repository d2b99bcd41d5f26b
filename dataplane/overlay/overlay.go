package overlay

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// Auto asks Detect for Geneve when the kernel has it, VXLAN otherwise.
const Auto plan.OverlayKind = "auto"

// Overhead is what the encapsulation adds to an inner IPv4 packet: outer
// IPv4 (20) and UDP (8), Geneve or VXLAN header (8), inner Ethernet (14).
const Overhead = 50

// ErrNotSupported reports that the kernel cannot create links of a kind.
var ErrNotSupported = errors.New("overlay kind not supported by the kernel")

// Detect resolves Auto to Geneve when the kernel can create a Geneve link
// (found by creating a throwaway one), to VXLAN otherwise; other kinds are
// checked the same way.
func Detect(h *netlink.Handle, want plan.OverlayKind) (plan.OverlayKind, error) {
	try := []plan.OverlayKind{want}
	if want == Auto {
		try = []plan.OverlayKind{plan.Geneve, plan.VXLAN}
	}
	var errs []error
	for _, k := range try {
		err := probe(h, k)
		if err == nil {
			return k, nil
		}
		if !errors.Is(err, ErrNotSupported) {
			return "", err
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

func probe(h *netlink.Handle, k plan.OverlayKind) error {
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return fmt.Errorf("probe %s: %w", k, err)
	}
	// No metadata mode and not up: the probe binds no socket. It takes
	// peerlink's own port and VNI: a CNI's device with VNI 1 on the
	// kernel's default port (Flannel's flannel.1) would refuse a second one
	// with EEXIST.
	name := "plov" + hex.EncodeToString(suffix[:])
	var l netlink.Link
	switch k {
	case plan.Geneve:
		l = &netlink.Geneve{LinkAttrs: netlink.LinkAttrs{Name: name}, ID: plan.VNI, Dport: plan.GenevePort, Remote: net.IPv4(192, 0, 2, 1)}
	case plan.VXLAN:
		l = &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: name}, VxlanId: plan.VNI, Port: plan.VXLANPort}
	default:
		return fmt.Errorf("probe overlay kind %q: unknown", k)
	}
	if err := h.LinkAdd(l); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("kernel has no %s link type: %w", k, ErrNotSupported)
		}
		if errors.Is(err, unix.EEXIST) {
			// Another device holds that VNI and port: the kernel knows
			// the link type, which is all the probe asks.
			return nil
		}
		return fmt.Errorf("probe %s: create link %s: %w", k, name, err)
	}
	if err := h.LinkDel(l); err != nil {
		return fmt.Errorf("probe %s: delete link %s: %w", k, name, err)
	}
	return nil
}

// Ensure creates the overlay link, or keeps it when a link of that name has
// the right kind, port and MAC address (a restarted agent adopts it without
// a gap); a link that differs is replaced. It reports whether it wrote
// anything. MTU and IP settings are package route's.
func Ensure(h *netlink.Handle, want plan.Overlay) (bool, error) {
	mac := plan.OverlayMAC(want.Underlay)
	cur, err := h.LinkByName(want.Name)
	if err == nil {
		if matches(cur, want) {
			if cur.Attrs().HardwareAddr.String() == mac.String() {
				return false, nil
			}
			if err := h.LinkSetHardwareAddr(cur, mac); err != nil {
				return false, fmt.Errorf("set MAC address of overlay link %s: %w", want.Name, err)
			}
			return true, nil
		}
		if err := h.LinkDel(cur); err != nil {
			return false, fmt.Errorf("delete overlay link %s (%s) to replace it: %w", want.Name, cur.Type(), err)
		}
	} else if !errors.As(err, new(netlink.LinkNotFoundError)) {
		return false, fmt.Errorf("look up overlay link %s: %w", want.Name, err)
	}
	attrs := netlink.LinkAttrs{Name: want.Name, HardwareAddr: mac}
	var l netlink.Link
	switch want.Kind {
	case plan.Geneve:
		l = &netlink.Geneve{LinkAttrs: attrs, Dport: plan.GenevePort, FlowBased: true}
	case plan.VXLAN:
		l = &netlink.Vxlan{LinkAttrs: attrs, Port: plan.VXLANPort, FlowBased: true, Learning: false}
	default:
		return false, fmt.Errorf("create overlay link %s: kind %q is not geneve nor vxlan", want.Name, want.Kind)
	}
	if err := h.LinkAdd(l); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return false, fmt.Errorf("create overlay link %s: kernel has no %s link type: %w", want.Name, want.Kind, ErrNotSupported)
		}
		return false, fmt.Errorf("create %s overlay link %s on port %d: %w", want.Kind, want.Name, want.Kind.Port(), err)
	}
	return true, nil
}

func matches(cur netlink.Link, want plan.Overlay) bool {
	switch l := cur.(type) {
	case *netlink.Geneve:
		return want.Kind == plan.Geneve && l.FlowBased && l.Dport == plan.GenevePort
	case *netlink.Vxlan:
		return want.Kind == plan.VXLAN && l.FlowBased && l.Port == plan.VXLANPort
	}
	return false
}

// Remove deletes the overlay link name if it exists.
func Remove(h *netlink.Handle, name string) error {
	cur, err := h.LinkByName(name)
	if err != nil {
		if errors.As(err, new(netlink.LinkNotFoundError)) {
			return nil
		}
		return fmt.Errorf("look up overlay link %s: %w", name, err)
	}
	if err := h.LinkDel(cur); err != nil {
		return fmt.Errorf("delete overlay link %s: %w", name, err)
	}
	return nil
}
