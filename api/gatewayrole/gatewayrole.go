package gatewayrole

import (
	"fmt"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// Role is the side a cluster's gateway takes in a peering: the server
// listens for the tunnel, the client dials it.
type Role string

// Roles of a peering.
const (
	Server Role = "server"
	Client Role = "client"
)

// Parse accepts server or client.
func Parse(s string) (Role, error) {
	if r := Role(s); r.Valid() {
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q: use %s or %s", s, Server, Client)
}

// Valid reports whether r is server or client.
func (r Role) Valid() bool {
	return r == Server || r == Client
}

// ConnectionType is the type of the Connection that reports the tunnel of a
// gateway of role r.
func (r Role) ConnectionType() netv1beta1.ConnectionType {
	if r == Server {
		return netv1beta1.ConnectionTypeServer
	}
	return netv1beta1.ConnectionTypeClient
}

// FromConnectionType is the role of the gateway whose tunnel a Connection
// of type t reports.
func FromConnectionType(t netv1beta1.ConnectionType) (Role, error) {
	switch t {
	case netv1beta1.ConnectionTypeServer:
		return Server, nil
	case netv1beta1.ConnectionTypeClient:
		return Client, nil
	}
	return "", fmt.Errorf("connection type %q: must be %s or %s", t, netv1beta1.ConnectionTypeServer, netv1beta1.ConnectionTypeClient)
}
