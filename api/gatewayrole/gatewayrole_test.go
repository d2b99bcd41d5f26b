package gatewayrole

import (
	"testing"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

func TestParse(t *testing.T) {
	for _, r := range []Role{Server, Client} {
		if got, err := Parse(string(r)); err != nil || got != r {
			t.Errorf("Parse(%q) = %q, %v", r, got, err)
		}
	}
	for _, s := range []string{"", "Server", "peer"} {
		if got, err := Parse(s); err == nil || got != "" {
			t.Errorf("Parse(%q) = %q, %v; want an error", s, got, err)
		}
	}
	const want = `unknown role "peer": use server or client`
	if _, err := Parse("peer"); err == nil || err.Error() != want {
		t.Errorf("Parse(peer): %v; want %s", err, want)
	}
}

// Each role has its own Connection type, and the mapping goes both ways.
func TestConnectionType(t *testing.T) {
	for r, want := range map[Role]netv1beta1.ConnectionType{Server: netv1beta1.ConnectionTypeServer, Client: netv1beta1.ConnectionTypeClient} {
		if got := r.ConnectionType(); got != want {
			t.Errorf("%s.ConnectionType() = %s, want %s", r, got, want)
		}
		if back, err := FromConnectionType(want); err != nil || back != r {
			t.Errorf("FromConnectionType(%s) = %q, %v; want %s", want, back, err, r)
		}
	}
	if r, err := FromConnectionType("server"); err == nil || r != "" {
		t.Errorf(`FromConnectionType("server") = %q, %v; want an error`, r, err)
	}
}
