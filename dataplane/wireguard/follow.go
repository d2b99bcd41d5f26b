package wireguard

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// moveWait is the longest a response waits for the allowed IPs to move
// before it leaves anyway. The move runs on its own goroutine: it takes
// wireguard-go's configuration locks, which a concurrent configuration may
// hold while it waits for the very goroutine that sends the response (a new
// listen port rebinds the sockets). Past the wait the move still happens,
// only later than the new session's first packets.
const moveWait = 100 * time.Millisecond

// drainWait is how long a response waits before the allowed IPs move, so
// that what the peer sent on its old session before it switched keys is
// still let in: the peer sends its initiation ahead of the data it had
// queued on the old session, and once the allowed IPs moved, the old
// session still decrypts that data but the device drops it, as the source
// no longer belongs to the old session's peer. The peer stages what it
// sends meanwhile (up to 128 packets), so nothing is lost.
const drainWait = 20 * time.Millisecond

// followBind is the conn.Bind of a userspace device: the standard one,
// which, while the device has more than one peer (a peer known under its
// current and its next key), reads each handshake initiation before
// wireguard-go does. An initiation from a key of the device's that does not
// hold the allowed IPs is remembered; when wireguard-go accepts it, its
// handshake response passes through Send, and the allowed IPs move to that
// key before the response leaves. The peer can send on the new session only
// once it has the response, so the session carries packets from and to the
// peer's ranges from its first packet on; before the move, what the peer
// sent on its old session is let in (drainWait). Moving on the response rather than
// on the initiation keeps the device from starting a handshake of its own
// with the new key (it would cross the peer's, and both fail until the next
// retry 5 s later): wireguard-go marks a handshake as just sent before it
// sends the response. With one peer (the common case) the receive and send
// paths cost one atomic load per batch.
//
// A move is made through the device's configuration protocol (UAPI), and
// only for an initiation later than the one of the last move: a replayed
// initiation moves nothing.
type followBind struct {
	conn.Bind
	log logr.Logger
	// dev is the device the bind serves, set before it goes up.
	dev *device.Device

	// state is nil while the device has fewer than two peers.
	state atomic.Pointer[followState]
	// pending is the last initiation that calls for a move, until the
	// response to it is sent.
	pending atomic.Pointer[pendingInitiation]
	// mu serializes refresh and move.
	mu sync.Mutex
}

// followState is what the receive path needs of the device: its keys and
// which peer holds the allowed IPs.
type followState struct {
	*responder
	// holder is the public key of the peer holding the allowed IPs; zero
	// when none does.
	holder [32]byte
	// newest is the timestamp of the initiation that made the last move.
	newest timestamp
}

// pendingInitiation is an initiation from a key that does not hold the
// allowed IPs.
type pendingInitiation struct {
	// sender is the initiator's index, which the response names as its
	// receiver.
	sender uint32
	static [32]byte
	ts     timestamp
}

// The handshake response: type 2, sender index, receiver index, then the
// rest (92 bytes in all).
const (
	responseType   = 2
	responseSize   = 92
	offsetReceiver = 8
)

func newFollowBind(bind conn.Bind, log logr.Logger) *followBind {
	return &followBind{Bind: bind, log: log}
}

// Open opens the standard bind and wraps its receive functions.
func (b *followBind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	fns, actual, err := b.Bind.Open(port)
	for i, fn := range fns {
		fns[i] = b.follow(fn)
	}
	return fns, actual, err
}

// follow wraps a receive function: each initiation of a batch is read
// before the batch goes to wireguard-go.
func (b *followBind) follow(fn conn.ReceiveFunc) conn.ReceiveFunc {
	return func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		n, err := fn(bufs, sizes, eps)
		if b.state.Load() == nil {
			return n, err
		}
		for i := range n {
			if pkt := bufs[i][:sizes[i]]; isInitiation(pkt) {
				b.inspect(pkt)
			}
		}
		return n, err
	}
}

// inspect remembers pkt when it is an initiation from one of the device's
// peers that does not hold the allowed IPs, newer than the one of the last
// move.
func (b *followBind) inspect(pkt []byte) {
	s := b.state.Load()
	if s == nil {
		return
	}
	static, ts, ok := s.read(pkt)
	if !ok || static == s.holder || !ts.after(s.newest) {
		return
	}
	b.pending.Store(&pendingInitiation{sender: binary.LittleEndian.Uint32(pkt[4:]), static: static, ts: ts})
}

// Send moves the allowed IPs before a response to the pending initiation
// leaves, after drainWait, waiting at most moveWait for the move.
func (b *followBind) Send(bufs [][]byte, ep conn.Endpoint) error {
	if p := b.pending.Load(); p != nil {
		for _, pkt := range bufs {
			if len(pkt) == responseSize && binary.LittleEndian.Uint32(pkt) == responseType &&
				binary.LittleEndian.Uint32(pkt[offsetReceiver:]) == p.sender && b.pending.CompareAndSwap(p, nil) {
				time.Sleep(drainWait)
				b.moveWithin(p, moveWait)
			}
		}
	}
	return b.Bind.Send(bufs, ep)
}

// moveWithin runs move for p, waiting at most wait for it.
func (b *followBind) moveWithin(p *pendingInitiation, wait time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := b.move(p.static, p.ts); err != nil {
			b.log.Error(err, "move the allowed IPs to the key the peer started a session with", "peer", keyString(p.static))
		}
	}()
	select {
	case <-done:
	case <-time.After(wait):
		b.log.Info("moving the allowed IPs takes long: the new session starts before, its first packets may be dropped", "peer", keyString(p.static), "wait", wait)
	}
}

// move gives every allowed IP of the device to the peer static, with the
// keepalive of the peer that held them, which keeps none: the other key is
// not in use any more and the device must not start sessions with it by
// itself.
func (b *followBind) move(static [32]byte, ts timestamp) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.state.Load()
	if s == nil || s.holder == static || !ts.after(s.newest) {
		return nil
	}
	cur, err := b.read()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(cur.peers, func(p uapiPeer) bool { return p.key == static }) {
		return nil
	}
	var set strings.Builder
	var allowed []string
	keepalive := "0"
	for _, p := range cur.peers {
		if p.key == static || len(p.allowedIPs) == 0 {
			continue
		}
		allowed = append(allowed, p.allowedIPs...)
		keepalive = p.keepalive
		fmt.Fprintf(&set, "public_key=%s\nupdate_only=true\npersistent_keepalive_interval=0\n", hex.EncodeToString(p.key[:]))
	}
	fmt.Fprintf(&set, "public_key=%s\nupdate_only=true\npersistent_keepalive_interval=%s\nreplace_allowed_ips=true\n", hex.EncodeToString(static[:]), keepalive)
	for _, a := range allowed {
		fmt.Fprintf(&set, "allowed_ip=%s\n", a)
	}
	if err := b.dev.IpcSet(set.String()); err != nil {
		return fmt.Errorf("move allowed IPs %v to peer %s: %w", allowed, keyString(static), err)
	}
	b.state.Store(&followState{responder: s.responder, holder: static, newest: ts})
	b.log.Info("the peer started a session with its other key: its allowed IPs moved to it", "peer", keyString(static), "allowedIPs", allowed)
	return nil
}

// refresh reads the device's keys and peers again; the device calls it
// after each configuration it writes.
func (b *followBind) refresh() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, err := b.read()
	if err != nil {
		return err
	}
	if len(cur.peers) < 2 {
		b.state.Store(nil)
		return nil
	}
	next := &followState{}
	keys := make([][32]byte, 0, len(cur.peers))
	for _, p := range cur.peers {
		keys = append(keys, p.key)
		if len(p.allowedIPs) > 0 && next.holder == ([32]byte{}) {
			next.holder = p.key
		}
	}
	next.responder = newResponder(cur.private, keys)
	if prev := b.state.Load(); prev != nil {
		next.newest = prev.newest
	}
	b.state.Store(next)
	return nil
}

// uapiDevice is what move and refresh read of the device.
type uapiDevice struct {
	private [32]byte
	peers   []uapiPeer
}

type uapiPeer struct {
	key        [32]byte
	allowedIPs []string
	keepalive  string
}

// read reads the device's configuration through UAPI.
func (b *followBind) read() (uapiDevice, error) {
	text, err := b.dev.IpcGet()
	if err != nil {
		return uapiDevice{}, fmt.Errorf("read the userspace device's configuration: %w", err)
	}
	return parseUAPI(text)
}

// parseUAPI reads the lines of a UAPI get that move and refresh need.
func parseUAPI(text string) (uapiDevice, error) {
	var d uapiDevice
	for line := range strings.Lines(text) {
		key, value, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch key {
		case "private_key", "public_key":
			raw, err := hex.DecodeString(value)
			if err != nil || len(raw) != 32 {
				return uapiDevice{}, fmt.Errorf("read the userspace device's configuration: %s is not a hex key", key)
			}
			if key == "private_key" {
				d.private = [32]byte(raw)
			} else {
				d.peers = append(d.peers, uapiPeer{key: [32]byte(raw), keepalive: "0"})
			}
		case "allowed_ip", "persistent_keepalive_interval":
			if len(d.peers) == 0 {
				return uapiDevice{}, errors.New("read the userspace device's configuration: " + key + " before any peer")
			}
			p := &d.peers[len(d.peers)-1]
			if key == "allowed_ip" {
				p.allowedIPs = append(p.allowedIPs, value)
			} else {
				p.keepalive = value
			}
		}
	}
	return d, nil
}

// keyString writes a key in base64, as wg(8) and the logs show keys.
func keyString(k [32]byte) string { return plan.Key(k).String() }
