package gatewayrole

import "fmt"

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
