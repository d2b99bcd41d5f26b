package peering_test

import (
	"errors"
	"testing"

	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/peering"
)

// TestConnectOptionsCheck names the field that cannot work; zero values
// are the API's defaults and pass.
func TestConnectOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		o     peering.ConnectOptions
		field string
	}{
		{peering.ConnectOptions{}, ""},
		{peering.ConnectOptions{Server: manifests.GatewayServerOptions{Replicas: 9}}, "ServerReplicas"},
		{peering.ConnectOptions{ClientReplicas: -1}, "ClientReplicas"},
		{peering.ConnectOptions{ClientPort: 70000}, "ClientPort"},
	} {
		err := tc.o.Check()
		fe, ok := errors.AsType[*field.Error](err)
		if tc.field == "" && err != nil || tc.field != "" && (!ok || fe.Field != tc.field) {
			t.Errorf("%+v: %v, want an error of field %q", tc.o, err, tc.field)
		}
	}
}
