package v1beta1

import (
	"testing"

	"github.com/peerlink/peerlink/api/gatewayrole"
)

// Each role has its own Connection type.
func TestConnectionTypeOf(t *testing.T) {
	for r, want := range map[gatewayrole.Role]ConnectionType{gatewayrole.Server: ConnectionTypeServer, gatewayrole.Client: ConnectionTypeClient} {
		if got := ConnectionTypeOf(r); got != want {
			t.Errorf("ConnectionTypeOf(%s) = %s, want %s", r, got, want)
		}
	}
}
