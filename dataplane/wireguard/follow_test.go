package wireguard

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/crypto/blake2s"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/conn/bindtest"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// The endpoints of bindtest's two connected binds: the first sends to the
// second at port 1, the second to the first at port 2.
const (
	toSecond = "127.0.0.1:1"
	toFirst  = "127.0.0.1:2"
)

// testDevice is a wireguard-go device in this process, on a TUN of channels.
type testDevice struct {
	*device.Device
	tun *tuntest.ChannelTUN
}

func newTestDevice(t *testing.T, bind conn.Bind) testDevice {
	t.Helper()
	tun := tuntest.NewChannelTUN()
	dev := device.NewDevice(tun.TUN(), bind, device.NewLogger(device.LogLevelSilent, ""))
	t.Cleanup(dev.Close)
	return testDevice{Device: dev, tun: tun}
}

func (d testDevice) set(t *testing.T, lines ...string) {
	t.Helper()
	if err := d.IpcSet(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatalf("IpcSet %q: %v", lines, err)
	}
}

func hexKey(k plan.Key) string { return hex.EncodeToString(k[:]) }

// captureInitiation returns the handshake initiation that a real device of
// private key from sends to the peer of public key to.
func captureInitiation(t *testing.T, from plan.Key, to plan.Key) []byte {
	t.Helper()
	binds := bindtest.NewChannelBinds()
	sender := newTestDevice(t, binds[0])
	sender.set(t, "private_key="+hexKey(from), "public_key="+hexKey(to), "endpoint="+toSecond,
		"allowed_ip=10.0.0.2/32", "persistent_keepalive_interval=1")
	if err := sender.Up(); err != nil {
		t.Fatal(err)
	}
	fns, _, err := binds[1].Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer binds[1].Close()
	got := make(chan []byte, 1)
	go func() {
		bufs, sizes, eps := [][]byte{make([]byte, 2048)}, []int{0}, []conn.Endpoint{nil}
		for {
			n, err := fns[0](bufs, sizes, eps)
			if err != nil {
				return
			}
			if n == 1 && isInitiation(bufs[0][:sizes[0]]) {
				got <- append([]byte(nil), bufs[0][:sizes[0]]...)
				return
			}
		}
	}()
	select {
	case pkt := <-got:
		return pkt
	case <-time.After(5 * time.Second):
		t.Fatal("no handshake initiation within 5 s")
		return nil
	}
}

// TestReadInitiation reads an initiation a real wireguard-go device made:
// the static key it decrypts is the sender's; what is truncated, not
// meant for this device, tampered with or from a stranger is refused.
func TestReadInitiation(t *testing.T) {
	sender, responderKey, stranger := mustKey(t), mustKey(t), mustKey(t)
	pkt := captureInitiation(t, sender, responderKey.PublicKey())
	r := newResponder(responderKey, [][32]byte{sender.PublicKey(), stranger.PublicKey()})

	static, ts, ok := r.read(pkt)
	if !ok || static != sender.PublicKey() {
		t.Fatalf("read = %x, %v; want the sender's public key %x", static, ok, sender.PublicKey())
	}
	if sec := binary.BigEndian.Uint64(ts[:8]); sec < 1<<62 {
		t.Errorf("timestamp %x: want a TAI64N label of the present (above 2^62)", ts)
	}

	// withMAC1 returns b with a mac1 that this responder accepts, so that
	// what follows mac1 is what refuses it.
	withMAC1 := func(b []byte) []byte {
		mac, _ := blake2s.New128(r.mac1Key[:])
		mac.Write(b[:offsetMAC1])
		copy(b[offsetMAC1:], mac.Sum(nil))
		return b
	}
	flip := func(at int) []byte {
		b := append([]byte(nil), pkt...)
		b[at] ^= 1
		return b
	}
	garbage := make([]byte, initiationSize)
	if _, err := rand.Read(garbage); err != nil {
		t.Fatal(err)
	}
	copy(garbage, []byte{initiationType, 0, 0, 0})
	for name, b := range map[string][]byte{
		"truncated":                    pkt[:initiationSize-1],
		"too long":                     append(append([]byte(nil), pkt...), 0),
		"another type":                 flip(0),
		"garbage":                      garbage,
		"a wrong mac1":                 flip(offsetMAC1),
		"a tampered ephemeral":         withMAC1(flip(offsetEphemeral)),
		"a tampered static key":        withMAC1(flip(offsetStatic + 3)),
		"a tampered timestamp":         withMAC1(flip(offsetTimestamp)),
		"garbage with a matching mac1": withMAC1(garbage),
	} {
		if _, _, ok := r.read(b); ok {
			t.Errorf("an initiation with %s was read", name)
		}
	}
	if _, _, ok := newResponder(stranger, [][32]byte{sender.PublicKey()}).read(pkt); ok {
		t.Error("an initiation for another device passed its mac1")
	}
	if _, _, ok := newResponder(responderKey, [][32]byte{stranger.PublicKey()}).read(pkt); ok {
		t.Error("an initiation from a key that is no peer of the device was read")
	}
}

// packet is an IPv4 header from src to dst carrying the sequence number
// seq: what wireguard-go looks at (version, length, addresses).
func packet(src, dst netip.Addr, seq uint64) []byte {
	b := make([]byte, 28)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	b[8] = 64
	b[9] = 253 // experimental protocol
	copy(b[12:16], src.AsSlice())
	copy(b[16:20], dst.AsSlice())
	binary.BigEndian.PutUint64(b[20:], seq)
	return b
}

// flow sends numbered packets into one TUN every interval until stop, and
// counts those the other TUN delivers until the test ends.
type flow struct{ tally }

func startFlow(t *testing.T, from, to *tuntest.ChannelTUN, src, dst netip.Addr, interval time.Duration, stop <-chan struct{}) *flow {
	f := &flow{tally{got: map[uint64]bool{}}}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case b := <-to.Inbound:
				if len(b) == 28 {
					f.arrived(binary.BigEndian.Uint64(b[20:]))
				}
			case <-done:
				return
			}
		}
	}()
	go everyTick(interval, stop, func(seq uint64) bool {
		select {
		case from.Outbound <- packet(src, dst, seq):
			f.sentUpTo(seq)
			return true
		case <-stop:
			return false
		}
	})
	return f
}

// everyTick calls send with 0, 1, 2 and on, one a tick of interval, until
// stop is closed or send returns false: the sender of a numbered flow.
func everyTick(interval time.Duration, stop <-chan struct{}, send func(seq uint64) bool) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for seq := uint64(0); ; seq++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if !send(seq) {
			return
		}
	}
}

// tally counts the numbered packets of a flow: how many were sent, and
// which arrived.
type tally struct {
	mu   sync.Mutex
	sent uint64
	got  map[uint64]bool
}

// sentUpTo records that packets 0 to seq were sent.
func (t *tally) sentUpTo(seq uint64) {
	t.mu.Lock()
	t.sent = seq + 1
	t.mu.Unlock()
}

// arrived records that packet seq arrived.
func (t *tally) arrived(seq uint64) {
	t.mu.Lock()
	t.got[seq] = true
	t.mu.Unlock()
}

// lost returns how many packets were sent and how many of them never
// arrived.
func (t *tally) lost() (sent, lost uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for seq := range t.sent {
		if !t.got[seq] {
			lost++
		}
	}
	return t.sent, lost
}

// holderOf returns the hex public key of the peer of d holding allowedIP.
func holderOf(t *testing.T, d *device.Device, allowedIP string) string {
	t.Helper()
	text, err := d.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	peer := ""
	for line := range strings.Lines(text) {
		key, value, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch {
		case key == "public_key":
			peer = value
		case key == "allowed_ip" && value == allowedIP:
			return peer
		}
	}
	return ""
}

// TestFollowMovesAllowedIPs runs two real wireguard-go devices in this
// process with packets flowing both ways every millisecond, and switches
// the private key of the first while the second knows both of its keys.
// With the second's bind following initiations, not a packet is lost and
// the allowed IPs end with the new key; without, the first side's packets
// are dropped from the switch on, which shows the test can fail.
func TestFollowMovesAllowedIPs(t *testing.T) {
	for _, follow := range []bool{true, false} {
		t.Run(fmt.Sprintf("follow=%v", follow), func(t *testing.T) {
			oldKey, newKey, bKey := mustKey(t), mustKey(t), mustKey(t)
			aAddr, bAddr := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
			binds := bindtest.NewChannelBinds()
			fb := newFollowBind(binds[1], logr.Discard())
			var bBind conn.Bind = binds[1]
			if follow {
				bBind = fb
			}
			a, b := newTestDevice(t, binds[0]), newTestDevice(t, bBind)
			fb.dev = b.Device
			a.set(t, "private_key="+hexKey(oldKey), "public_key="+hexKey(bKey.PublicKey()), "endpoint="+toSecond, "allowed_ip=10.0.0.2/32")
			b.set(t, "private_key="+hexKey(bKey),
				"public_key="+hexKey(oldKey.PublicKey()), "endpoint="+toFirst, "allowed_ip=10.0.0.1/32",
				"public_key="+hexKey(newKey.PublicKey()), "endpoint="+toFirst)
			if err := fb.refresh(); err != nil {
				t.Fatal(err)
			}
			for _, d := range []testDevice{a, b} {
				if err := d.Up(); err != nil {
					t.Fatal(err)
				}
			}

			// The session starts from one side before the flows: both
			// sides starting at once cross their handshakes, which then
			// both fail until the retry 5 s later.
			a.tun.Outbound <- packet(aAddr, bAddr, 0)
			select {
			case <-b.tun.Inbound:
			case <-time.After(10 * time.Second):
				t.Fatal("the tunnel did not come up within 10 s")
			}

			stop := make(chan struct{})
			aToB := startFlow(t, a.tun, b.tun, aAddr, bAddr, time.Millisecond, stop)
			bToA := startFlow(t, b.tun, a.tun, bAddr, aAddr, time.Millisecond, stop)
			time.Sleep(300 * time.Millisecond)
			a.set(t, "private_key="+hexKey(newKey))
			time.Sleep(500 * time.Millisecond)
			close(stop)
			time.Sleep(200 * time.Millisecond)

			sentAB, lostAB := aToB.lost()
			sentBA, lostBA := bToA.lost()
			t.Logf("a to b: %d sent, %d lost; b to a: %d sent, %d lost", sentAB, lostAB, sentBA, lostBA)
			holder := holderOf(t, b.Device, "10.0.0.1/32")
			if !follow {
				if lostAB == 0 {
					t.Error("without following initiations no packet was lost: the test cannot tell the difference")
				}
				return
			}
			if sentAB < 200 || sentBA < 200 {
				t.Errorf("only %d and %d packets sent: the flows did not run", sentAB, sentBA)
			}
			if lostAB > 0 || lostBA > 0 {
				t.Errorf("lost %d of %d packets from a to b and %d of %d from b to a across the key switch, want none", lostAB, sentAB, lostBA, sentBA)
			}
			if holder != hexKey(newKey.PublicKey()) {
				t.Errorf("10.0.0.1/32 is held by peer %s, want the new key %s", holder, hexKey(newKey.PublicKey()))
			}
		})
	}
}
