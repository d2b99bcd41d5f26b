package health

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// An Endpoint is where a gateway server is reachable from outside its
// cluster: its addresses (IPs or host names, the first preferred) and one
// port, as its GatewayServer's status publishes them. A server announces
// it through the tunnel, so that its client follows a move (a node port or
// a load balancer changed) without a new exchange of files.
type Endpoint struct {
	Addresses []string
	Port      uint16
}

// IsZero reports whether e names no endpoint.
func (e Endpoint) IsZero() bool { return len(e.Addresses) == 0 && e.Port == 0 }

// Equal reports whether e and o name the same addresses, in the same
// order, and the same port.
func (e Endpoint) Equal(o Endpoint) bool {
	return e.Port == o.Port && slices.Equal(e.Addresses, o.Addresses)
}

// String is the addresses, comma-separated, and the port, as a log or a
// message names the endpoint.
func (e Endpoint) String() string {
	return strings.Join(e.Addresses, ",") + " port " + strconv.Itoa(int(e.Port))
}

// Bounds of an endpoint announcement. A GatewayServer's status holds at
// most 16 addresses of at most 253 bytes each, but an announcement must
// fit a tunnel packet of the smallest MTU: its addresses take at most
// MaxEndpointBytes, and a longer list is not announced (a server whose
// endpoint does not fit is followed through a new exchange of files).
const (
	MaxEndpointAddresses = 16
	MaxEndpointBytes     = 1024
	maxAddressLength     = 253
)

// An endpoint announcement is the header (its nonce unused), the port (two
// bytes), a count, and per address its length (one byte) and its text. It
// follows each ping while the sender has an endpoint to announce (a
// server), and is not answered.
const kindEndpoint = 9

// CheckEndpoint returns nil when e is an endpoint that may be announced
// and followed: a port, and one to MaxEndpointAddresses addresses, each an
// IP address or a DNS name, MaxEndpointBytes at most in all. It judges the
// form alone; where the addresses may point is the follower's policy.
func CheckEndpoint(e Endpoint) error {
	if e.Port == 0 {
		return errors.New("no port")
	}
	if len(e.Addresses) == 0 || len(e.Addresses) > MaxEndpointAddresses {
		return fmt.Errorf("%d addresses, want 1 to %d", len(e.Addresses), MaxEndpointAddresses)
	}
	total := 0
	for _, a := range e.Addresses {
		total += len(a)
		if len(a) > maxAddressLength {
			return fmt.Errorf("address of %d bytes, at most %d", len(a), maxAddressLength)
		}
		if _, err := netip.ParseAddr(a); err == nil {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(a); len(errs) > 0 {
			return fmt.Errorf("address %q is neither an IP address nor a DNS name: %s", a, errs[0])
		}
	}
	if total > MaxEndpointBytes {
		return fmt.Errorf("addresses of %d bytes in all, at most %d", total, MaxEndpointBytes)
	}
	return nil
}

// endpointAnnouncement encodes e, which CheckEndpoint accepts.
func endpointAnnouncement(e Endpoint) ([]byte, error) {
	if err := CheckEndpoint(e); err != nil {
		return nil, err
	}
	b := binary.BigEndian.AppendUint16(packet(kindEndpoint, 0), e.Port)
	b = append(b, byte(len(e.Addresses)))
	for _, a := range e.Addresses {
		b = append(b, byte(len(a)))
		b = append(b, a...)
	}
	return b, nil
}

// parseEndpoint decodes an endpoint announcement, b past its header.
// Anything but the exact encoding of an endpoint CheckEndpoint accepts is
// an error.
func parseEndpoint(b []byte) (Endpoint, error) {
	if len(b) < 3 {
		return Endpoint{}, errors.New("cut short before the count")
	}
	e := Endpoint{Port: binary.BigEndian.Uint16(b)}
	n := int(b[2])
	if n == 0 || n > MaxEndpointAddresses {
		return Endpoint{}, fmt.Errorf("%d addresses, want 1 to %d", n, MaxEndpointAddresses)
	}
	b = b[3:]
	for range n {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return Endpoint{}, errors.New("an address cut short")
		}
		e.Addresses = append(e.Addresses, string(b[1:1+int(b[0])]))
		b = b[1+int(b[0]):]
	}
	if len(b) > 0 {
		return Endpoint{}, fmt.Errorf("%d bytes past the last address", len(b))
	}
	if err := CheckEndpoint(e); err != nil {
		return Endpoint{}, err
	}
	return e, nil
}
