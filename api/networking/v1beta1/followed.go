package v1beta1

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// FollowedEndpointAnnotation, on a client's Connection, is the server's
// endpoint the client's gateway follows, as the server announced it through
// the tunnel, with the endpoint its GatewayClient named then: a
// FollowedEndpoint in JSON (peerlink).
const FollowedEndpointAnnotation = "peerlink.io/followed-endpoint"

// FollowedEndpoint is what FollowedEndpointAnnotation holds.
// +kubebuilder:object:generate=false
type FollowedEndpoint struct {
	// Addresses and Port are where the server announced it is reachable.
	Addresses []string `json:"addresses"`
	Port      uint16   `json:"port"`
	// Over is the endpoint the GatewayClient named when the announcement
	// came: once it names another (the admins exchanged files again), the
	// GatewayClient wins and the announcement is forgotten.
	Over AnnouncedEndpoint `json:"over"`
}

// AnnouncedEndpoint is an endpoint of a FollowedEndpoint: addresses and
// one port.
// +kubebuilder:object:generate=false
type AnnouncedEndpoint struct {
	Addresses []string `json:"addresses"`
	Port      uint16   `json:"port"`
}

// String is the addresses, comma-separated, and the port.
func (e AnnouncedEndpoint) String() string {
	return strings.Join(e.Addresses, ",") + " port " + strconv.Itoa(int(e.Port))
}

// ParseFollowedEndpoint reads a FollowedEndpointAnnotation value.
func ParseFollowedEndpoint(s string) (FollowedEndpoint, error) {
	var f FollowedEndpoint
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return f, fmt.Errorf("annotation %s: %w", FollowedEndpointAnnotation, err)
	}
	if len(f.Addresses) == 0 || f.Port == 0 {
		return f, fmt.Errorf("annotation %s: no address or no port", FollowedEndpointAnnotation)
	}
	return f, nil
}
