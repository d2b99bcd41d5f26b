package rangepolicy

import (
	"fmt"
	"net/netip"
)

// CheckServerAddr returns nil when addr may be the address a peer names
// for its gateway server, which this cluster's gateway then sends to: not
// the unspecified, loopback, link-local or multicast address of any host,
// nor the IPv4 broadcast address, in either family. Those would point this
// cluster's gateway at itself, its node or the cloud's metadata service
// instead of the peer. An IPv4-mapped IPv6 address is judged as the IPv4
// address it maps, and an address with a zone is refused: the zone names
// an interface of this host, which a peer knows nothing of.
func CheckServerAddr(addr netip.Addr) error {
	a := addr.Unmap()
	switch {
	case !a.IsValid():
		return fmt.Errorf("no address")
	case a.IsUnspecified(), a.IsLoopback(), a.IsLinkLocalUnicast(), a.IsMulticast(), a.IsLinkLocalMulticast(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%s is not the address of a server: unspecified, loopback, link-local, multicast and broadcast addresses are refused", addr)
	case a.Zone() != "":
		return fmt.Errorf("%s is not the address of a server: a zone names an interface of this host", addr)
	}
	return nil
}
