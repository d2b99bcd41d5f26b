package wireguard

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// echoFlow sends a numbered datagram every interval from one namespace to
// an echo server in the other, through the tunnel, and counts the echoes:
// a datagram is lost when either way dropped it.
type echoFlow struct {
	tally
	conn net.PacketConn
}

// serveEcho answers every datagram to addr, in ns, with itself.
func serveEcho(t *testing.T, ns *netns.NS, addr string) {
	t.Helper()
	var c net.PacketConn
	if err := ns.Do(func() (err error) { c, err = net.ListenPacket("udp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteTo(buf[:n], from)
		}
	}()
}

func startEcho(t *testing.T, ns *netns.NS, from string, to netip.AddrPort, interval time.Duration, stop <-chan struct{}) *echoFlow {
	t.Helper()
	f := &echoFlow{tally: tally{got: map[uint64]bool{}}}
	if err := ns.Do(func() (err error) { f.conn, err = net.ListenPacket("udp4", from); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.conn.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, err := f.conn.ReadFrom(buf)
			if err != nil {
				return
			}
			if n == 8 {
				f.arrived(binary.BigEndian.Uint64(buf))
			}
		}
	}()
	dst := net.UDPAddrFromAddrPort(to)
	go everyTick(interval, stop, func(seq uint64) bool {
		b := binary.BigEndian.AppendUint64(nil, seq)
		f.sentUpTo(seq)
		// A send the kernel refuses is a datagram lost like any other.
		_, _ = f.conn.WriteTo(b, dst)
		return true
	})
	return f
}

// side is one gateway of the rotation test: a userspace device in its own
// namespace, and its plan.
type side struct {
	ns   *netns.NS
	dev  Device
	want plan.WireGuard
}

func (s *side) sync(t *testing.T) {
	t.Helper()
	if _, err := Sync(s.dev, s.want); err != nil {
		t.Fatal(err)
	}
}

func (s *side) device(t *testing.T) *wgtypes.Device {
	t.Helper()
	d, err := s.dev.Device()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRotationLosesNothing runs two userspace devices in two namespaces
// joined by a veth, a UDP echo every 10 ms through the tunnel each way,
// and rotates the key of one side, then of the other, as the gateway agent
// does: the peer first holds the next key as a second peer, then the
// rotating side switches its private key, and after the switch the old key
// is dropped. Not one echo may be lost, the new keys must be in use and the
// old peers gone. A side that has a next key but no go-ahead keeps its key,
// and the traffic flows on.
func TestRotationLosesNothing(t *testing.T) {
	nsA, nsB := netns.Joined(t,
		netns.End{Prefix: "rota", Link: "veth0", Addr: "10.9.0.1/24"},
		netns.End{Prefix: "rotb", Link: "veth0", Addr: "10.9.0.2/24"})
	if err := os.MkdirAll(socketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	tunA, tunB := netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")
	a0, a1, b0, b1 := mustKey(t), mustKey(t), mustKey(t), mustKey(t)
	a := &side{ns: nsA, want: plan.WireGuard{PrivateKey: a0, Peer: plan.WireGuardPeer{PublicKey: b0.PublicKey(), AllowedIPs: []netip.Prefix{netip.PrefixFrom(tunB, 32)}}}}
	b := &side{ns: nsB, want: plan.WireGuard{PrivateKey: b0, Peer: plan.WireGuardPeer{PublicKey: a0.PublicKey(), AllowedIPs: []netip.Prefix{netip.PrefixFrom(tunA, 32)}}}}
	for _, s := range []struct {
		*side
		name      string
		own, peer netip.Addr
	}{{a, "plrota0", tunA, tunB}, {b, "plrotb0", tunB, tunA}} {
		// wireguard-go opens its sockets on whichever goroutine brings it
		// up, which may be the one that follows the TUN's events and
		// runs outside of the namespace (an agent runs in its namespace
		// as a whole): the sockets are opened again inside.
		if err := s.ns.Do(func() (err error) {
			if s.dev, err = Open(s.name, Userspace, 1420, logr.Discard()); err != nil {
				return err
			}
			return s.dev.(*userspaceDevice).dev.BindUpdate()
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.dev.Close() })
		s.ns.MustRun(t, "ip", "addr", "add", s.own.String()+"/32", "dev", s.name)
		s.ns.MustRun(t, "ip", "route", "add", s.peer.String()+"/32", "dev", s.name)
		// The listen port stays the one the device picked when it went
		// up, inside its namespace: a new port would be bound by
		// wireguard-go's configuration goroutine, outside of it.
		s.sync(t)
	}
	a.want.Peer.Endpoint = netip.AddrPortFrom(netip.MustParseAddr("10.9.0.2"), uint16(b.device(t).ListenPort))
	b.want.Peer.Endpoint = netip.AddrPortFrom(netip.MustParseAddr("10.9.0.1"), uint16(a.device(t).ListenPort))
	a.sync(t)
	b.sync(t)

	serveEcho(t, nsA, tunA.String()+":7000")
	serveEcho(t, nsB, tunB.String()+":7000")
	// One side starts the session before the flows, which would otherwise
	// start it from both sides at once: crossed handshakes both fail until
	// the retry 5 s later, which is no part of a rotation.
	warmed := make(chan struct{})
	warm := startEcho(t, nsA, tunA.String()+":7001", netip.AddrPortFrom(tunB, 7000), 20*time.Millisecond, warmed)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if sent, lost := warm.lost(); sent > 0 && lost < sent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no echo through the tunnel within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(warmed)

	stop := make(chan struct{})
	aToB := startEcho(t, nsA, tunA.String()+":7002", netip.AddrPortFrom(tunB, 7000), 10*time.Millisecond, stop)
	bToA := startEcho(t, nsB, tunB.String()+":7002", netip.AddrPortFrom(tunA, 7000), 10*time.Millisecond, stop)
	settle := func() { time.Sleep(700 * time.Millisecond) }
	settle()

	// A rotating side keeps its key until told to switch: a next key in
	// the plan alone changes nothing.
	b.want.NextPrivateKey = b1
	b.sync(t)
	settle()
	if got := b.device(t).PrivateKey; got != wgtypes.Key(b0) {
		t.Fatalf("a next private key in the plan switched the device: %s", got)
	}

	rotate := func(rotating, peer *side, next plan.Key) {
		t.Helper()
		old := rotating.want.PrivateKey.PublicKey()
		peer.want.Peer.NextPublicKey = next.PublicKey()
		peer.sync(t)
		settle()
		rotating.want.PrivateKey, rotating.want.NextPrivateKey = next, plan.Key{}
		rotating.sync(t)
		settle()
		if got := Holder(peer.device(t), peer.want.Peer); got != next.PublicKey() {
			t.Fatalf("after the switch the allowed IPs are held by %s, want the next key %s", got, next.PublicKey())
		}
		// The grace period is over: the next key is the only one.
		peer.want.Peer.PublicKey, peer.want.Peer.NextPublicKey = next.PublicKey(), plan.Key{}
		peer.sync(t)
		settle()
		d := peer.device(t)
		if len(d.Peers) != 1 || FindPeer(d, next.PublicKey()) == nil || FindPeer(d, old) != nil {
			t.Fatalf("after the grace period the peer's device has peers %v, want the next key %s alone", d.Peers, next.PublicKey())
		}
		if p := FindPeer(rotating.device(t), peer.want.PrivateKey.PublicKey()); p == nil || p.LastHandshakeTime.IsZero() {
			t.Fatalf("the rotating side has no session with its peer: %+v", p)
		}
	}
	rotate(a, b, a1)
	rotate(b, a, b1)
	close(stop)
	time.Sleep(500 * time.Millisecond)

	sentAB, lostAB := aToB.lost()
	sentBA, lostBA := bToA.lost()
	t.Logf("echoes from a: %d sent, %d lost; from b: %d sent, %d lost", sentAB, lostAB, sentBA, lostBA)
	if sentAB < 300 || sentBA < 300 {
		t.Errorf("only %d and %d echoes sent: the flows did not run", sentAB, sentBA)
	}
	if lostAB > 0 || lostBA > 0 {
		t.Errorf("lost %d of %d echoes from a and %d of %d from b across two key rotations, want none", lostAB, sentAB, lostBA, sentBA)
	}
	if got := a.device(t).PrivateKey; got != wgtypes.Key(a1) {
		t.Errorf("a runs on %s, want its new key", got)
	}
	if got := b.device(t).PrivateKey; got != wgtypes.Key(b1) {
		t.Errorf("b runs on %s, want its new key", got)
	}
}
