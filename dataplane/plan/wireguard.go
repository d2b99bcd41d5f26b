package plan

import (
	"crypto/ecdh"
	"encoding/base64"
	"fmt"
	"net/netip"
	"time"
)

// Key is a WireGuard key, private or public: 32 bytes, written in base64.
type Key [32]byte

// NewKey takes the 32 raw bytes of a key.
func NewKey(b []byte) (Key, error) {
	var k Key
	if len(b) != len(k) {
		return Key{}, fmt.Errorf("key of %d bytes: want %d", len(b), len(k))
	}
	copy(k[:], b)
	return k, nil
}

// ParseKey reads a key in base64, as String writes it.
func ParseKey(s string) (Key, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return Key{}, fmt.Errorf("parse base64 key: %w", err)
	}
	return NewKey(b)
}

// String is the key in base64, as wg(8) shows it.
func (k Key) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// PublicKey is the public key of k, a private key: its X25519 product with
// the base point.
func (k Key) PublicKey() Key {
	priv, err := ecdh.X25519().NewPrivateKey(k[:])
	if err != nil {
		// NewPrivateKey only refuses a scalar that is not 32 bytes long.
		panic(fmt.Sprintf("plan: X25519 private key: %v", err))
	}
	return Key(priv.PublicKey().Bytes())
}

// WireGuard is the desired configuration of a WireGuard device with a
// single peer, which a key rotation lets be known under two keys for a
// while.
type WireGuard struct {
	// PrivateKey is the device's own key.
	PrivateKey Key
	// NextPrivateKey is the key the device is to switch to once the peer
	// accepts its public half; zero: none. The switch itself is the
	// gateway agent's: the device runs on PrivateKey until then.
	NextPrivateKey Key
	// ListenPort is the UDP port to listen on; 0 lets the device pick one
	// (a client needs no fixed port).
	ListenPort int
	// Peer is the other side of the tunnel; none when its key is zero
	// (a standby gateway replica, which answers nobody).
	Peer WireGuardPeer
}

// WireGuardPeer is the desired configuration of a device's one peer.
type WireGuardPeer struct {
	// PublicKey identifies the peer.
	PublicKey Key
	// NextPublicKey is the key the peer announced it will switch to; zero:
	// none. While it is set the device holds a second peer of this key,
	// with the same endpoint, and AllowedIPs belong to exactly one of the
	// two: the one the peer last started a session with.
	NextPublicKey Key
	// Endpoint is where the peer is reached. Invalid (the zero value) means
	// "keep whatever the device learned": a server never knows its client's
	// address in advance, and must not forget it on a resync.
	Endpoint netip.AddrPort
	// AllowedIPs are the source ranges accepted from the peer.
	AllowedIPs []netip.Prefix
	// PersistentKeepalive is the keepalive interval; 0 disables it.
	PersistentKeepalive time.Duration
}
