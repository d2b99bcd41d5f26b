package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/peerlink/peerlink/internal/field"
)

// TestCheck names the options that cannot work by their fields, which a
// command maps to its flags.
func TestCheck(t *testing.T) {
	err := errors.Join(
		AgentOptions{NodeIP: netip.MustParseAddr("fd30:0:1::2"), MTU: -1}.Check()...,
	)
	err = errors.Join(err, fmt.Errorf("wrapped: %w", field.Required("KeyDir", false)), errors.New("plain"), field.Required("Other", false))
	got := field.WithFlags(err, map[string]string{"Namespace": "--namespace", "NodeIP": "--node-ip", "MTU": "--mtu", "ResyncInterval": "--resync-interval", "KeyDir": "--key-dir"})
	want := "--namespace: required\n--mtu -1: must not be negative\n" +
		"--resync-interval 0s: must be positive\nwrapped: KeyDir: required\nplain\nOther: required"
	if got == nil || got.Error() != want {
		t.Errorf("WithFlags =\n%v\nwant\n%s", got, want)
	}
	if err := (AgentOptions{Namespace: "n", ResyncInterval: time.Second}).Check(); errors.Join(err...) != nil {
		t.Errorf("Check of good options = %v", err)
	}
}
