package wireguard

import (
	"bytes"
	"crypto/hmac"
	"encoding/binary"
	"hash"

	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/curve25519"
)

// The first message of WireGuard's handshake, the initiation (Noise IKpsk2),
// as the whitepaper lays it out: type (1, then three zero bytes), sender
// index, the initiator's ephemeral public key, its static public key
// encrypted (32 bytes and a 16-byte tag), a TAI64N timestamp encrypted (12
// and 16), mac1 and mac2.
const (
	initiationType      = 1
	initiationSize      = 148
	offsetEphemeral     = 8
	offsetStatic        = offsetEphemeral + 32
	offsetTimestamp     = offsetStatic + 32 + chacha20poly1305.Overhead
	offsetMAC1          = offsetTimestamp + timestampSize + chacha20poly1305.Overhead
	offsetMAC2          = offsetMAC1 + blake2s.Size128
	timestampSize       = 12
	noiseConstruction   = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s"
	wireguardIdentifier = "WireGuard v1 zx2c4 Jason@zx2c4.com"
	mac1Label           = "mac1----"
)

// timestamp is the TAI64N time an initiator put in its initiation; later
// times compare greater, byte by byte.
type timestamp [timestampSize]byte

// after reports whether t is later than u.
func (t timestamp) after(u timestamp) bool { return bytes.Compare(t[:], u[:]) > 0 }

// responder reads the initiations sent to a device: who sent them, and
// when. It holds the device's private key, so it is never logged.
type responder struct {
	private [32]byte
	// mac1Key is BLAKE2s("mac1----" || public key): a packet whose mac1
	// does not match was not meant for this device and costs no more.
	mac1Key [blake2s.Size]byte
	// chainKey and hash are the Noise state once the responder's public
	// key is mixed in, the same for every initiation.
	chainKey, hash [blake2s.Size]byte
	// staticStatic is the X25519 product of the private key with each
	// peer's public key, which opens the timestamp of that peer's
	// initiations.
	staticStatic map[[32]byte][32]byte
}

// newResponder prepares the reading of initiations sent to the device of
// private key private by the peers of public keys peers.
func newResponder(private [32]byte, peers [][32]byte) *responder {
	r := &responder{private: private, staticStatic: make(map[[32]byte][32]byte, len(peers))}
	public, err := curve25519.X25519(private[:], curve25519.Basepoint)
	if err != nil {
		// Only a low-order point fails, and the base point is not one.
		panic("wireguard: X25519 with the base point: " + err.Error())
	}
	h := blake2s256(nil, []byte(mac1Label), public)
	copy(r.mac1Key[:], h)
	r.chainKey = [blake2s.Size]byte(blake2s256(nil, []byte(noiseConstruction)))
	r.hash = [blake2s.Size]byte(blake2s256(nil, r.chainKey[:], []byte(wireguardIdentifier)))
	r.hash = [blake2s.Size]byte(blake2s256(nil, r.hash[:], public))
	for _, p := range peers {
		// A peer key that is a low-order point yields no shared secret;
		// its initiations are then never read (wireguard-go refuses them
		// as well).
		if ss, err := curve25519.X25519(private[:], p[:]); err == nil {
			r.staticStatic[p] = [32]byte(ss)
		}
	}
	return r
}

// isInitiation reports whether b has the type and size of a handshake
// initiation: the whole cost of a packet of any other kind.
func isInitiation(b []byte) bool {
	return len(b) == initiationSize && binary.LittleEndian.Uint32(b) == initiationType
}

// read returns the static public key of the initiator of b, one of the
// peers newResponder was given, and the timestamp it sent. ok is false for
// anything else: not an initiation, a mac1 that is not this device's, a
// static key that does not decrypt or belongs to no peer, a timestamp that
// does not decrypt. Checking mac1 costs one keyed BLAKE2s; only then comes
// the one X25519 of the reading.
func (r *responder) read(b []byte) (static [32]byte, ts timestamp, ok bool) {
	if !isInitiation(b) {
		return static, ts, false
	}
	mac1, err := blake2s.New128(r.mac1Key[:])
	if err != nil {
		return static, ts, false
	}
	mac1.Write(b[:offsetMAC1])
	if !hmac.Equal(mac1.Sum(nil), b[offsetMAC1:offsetMAC2]) {
		return static, ts, false
	}

	ephemeral := b[offsetEphemeral:offsetStatic]
	chainKey := kdf1(r.chainKey[:], ephemeral)
	h := blake2s256(nil, r.hash[:], ephemeral)
	ss, err := curve25519.X25519(r.private[:], ephemeral)
	if err != nil {
		return static, ts, false
	}
	chainKey, key := kdf2(chainKey, ss)
	sealedStatic := b[offsetStatic:offsetTimestamp]
	opened, ok := open(key, sealedStatic, h)
	if !ok {
		return static, ts, false
	}
	static = [32]byte(opened)
	staticStatic, known := r.staticStatic[static]
	if !known {
		return static, ts, false
	}
	h = blake2s256(nil, h, sealedStatic)
	_, key = kdf2(chainKey, staticStatic[:])
	opened, ok = open(key, b[offsetTimestamp:offsetMAC1], h)
	if !ok {
		return static, ts, false
	}
	return static, timestamp(opened), true
}

// open decrypts sealed with ChaCha20-Poly1305 under key, the zero nonce
// and the additional data ad, as every AEAD of the handshake does.
func open(key, sealed, ad []byte) ([]byte, bool) {
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, false
	}
	var nonce [chacha20poly1305.NonceSize]byte
	out, err := aead.Open(nil, nonce[:], sealed, ad)
	return out, err == nil
}

// blake2s256 is the unkeyed BLAKE2s-256 of the concatenated parts, appended
// to dst.
func blake2s256(dst []byte, parts ...[]byte) []byte {
	h, _ := blake2s.New256(nil)
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(dst)
}

// hmacBLAKE2s is HMAC over BLAKE2s-256, the HMAC of the Noise KDF.
func hmacBLAKE2s(key []byte, parts ...[]byte) []byte {
	m := hmac.New(func() hash.Hash { h, _ := blake2s.New256(nil); return h }, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// kdf1 and kdf2 are the HKDF of the Noise protocol with one and two outputs.
func kdf1(key, input []byte) []byte {
	prk := hmacBLAKE2s(key, input)
	return hmacBLAKE2s(prk, []byte{1})
}

func kdf2(key, input []byte) (t0, t1 []byte) {
	prk := hmacBLAKE2s(key, input)
	t0 = hmacBLAKE2s(prk, []byte{1})
	return t0, hmacBLAKE2s(prk, t0, []byte{2})
}
