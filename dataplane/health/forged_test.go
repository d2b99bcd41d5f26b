package health

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// forge sends pongs to the prober at to from conn, with nonces that a
// sender who cannot see the pings might try: small numbers, as sequence
// numbers would be, and the zero nonce; and echoes every ping it can see.
func forge(ctx context.Context, conn net.PacketConn, to net.Addr) {
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			if kind, nonce, ok := decode(buf[:n]); ok && kind == kindPing && ctx.Err() == nil {
				// An answer from the right address with the right nonce
				// would be the peer itself: this forger answers one off.
				_, _ = conn.WriteTo(packet(kindPong, nonce+1), to)
			}
		}
	}()
	for i := uint64(0); ctx.Err() == nil; i++ {
		_, _ = conn.WriteTo(packet(kindPong, i%64), to)
		short := make([]byte, 3)
		binary.BigEndian.PutUint16(short, uint16(i))
		_, _ = conn.WriteTo(short, to)
		time.Sleep(time.Millisecond)
	}
}

// TestForgedPongs runs a prober whose peer never answers while forged
// pongs arrive: from another address, and from the peer's own address
// with nonces it never sent. It must go to Error as if nothing came, and
// count what it ignored.
func TestForgedPongs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fromPeer   bool
		wantReason string
	}{{"from another address", false, "sender"}, {"from the peer's address", true, "stale"}} {
		t.Run(tc.name, func(t *testing.T) {
			c, addr := listen(t)
			peerConn, peerAddr := listen(t)
			defer peerConn.Close()
			p := &Prober{Conn: c, Peer: peerAddr, Interval: 20 * time.Millisecond, MaxMisses: 3}
			forger := peerConn
			if !tc.fromPeer {
				other, _ := listen(t)
				defer other.Close()
				forger = other
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go forge(ctx, forger, net.UDPAddrFromAddrPort(addr))
			reports := make(chan Report, 100)
			done := make(chan struct{})
			go func() { _ = p.Run(ctx, func(r Report) { reports <- r }); close(done) }()
			deadline := time.After(5 * time.Second)
			for {
				select {
				case r := <-reports:
					if r.State == Connected {
						t.Fatalf("forged pongs made the tunnel Connected: %+v", r)
					}
					if r.State != Error {
						continue
					}
				case <-deadline:
					t.Fatal("no Error report within 5 s")
				}
				break
			}
			cancel()
			<-done
			if got := p.Ignored(); got[tc.wantReason] == 0 {
				t.Errorf("ignored %v, want some for reason %q", got, tc.wantReason)
			}
		})
	}
}

// TestForgedPongsInNamespaces is the same with the prober bound to its
// tunnel address in a network namespace, and the forger in another one on
// the same link: first from its own address, then holding the peer's
// address itself. The prober never turns Connected.
func TestForgedPongsInNamespaces(t *testing.T) {
	gw, other := netns.Joined(t,
		netns.End{Prefix: "hgw", Link: "tun0", Addr: "169.254.18.1/30"},
		netns.End{Prefix: "hforge", Link: "eth0", Addr: "169.254.18.3/30"})
	self := netip.MustParseAddrPort("169.254.18.1:12345")
	peer := netip.MustParseAddrPort("169.254.18.2:12345")
	var c net.PacketConn
	if err := gw.Do(func() (err error) {
		c, err = net.ListenPacket("udp4", self.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p := &Prober{Conn: c, Peer: peer, Interval: 50 * time.Millisecond, MaxMisses: 3}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan Report, 100)
	go func() { _ = p.Run(ctx, func(r Report) { reports <- r }) }()

	forgeFrom := func(addr string) context.CancelFunc {
		fctx, fcancel := context.WithCancel(ctx)
		var f net.PacketConn
		if err := other.Do(func() (err error) {
			f, err = net.ListenPacket("udp4", addr)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		go func() { <-fctx.Done(); f.Close() }()
		go forge(fctx, f, net.UDPAddrFromAddrPort(self))
		return fcancel
	}
	expectNoConnected := func(d time.Duration) {
		t.Helper()
		end := time.After(d)
		for {
			select {
			case r := <-reports:
				if r.State == Connected {
					t.Fatalf("forged pongs made the tunnel Connected: %+v", r)
				}
			case <-end:
				return
			}
		}
	}
	stop := forgeFrom("169.254.18.3:12345")
	expectNoConnected(time.Second)
	stop()
	other.MustRun(t, "ip", "addr", "add", "169.254.18.2/30", "dev", "eth0")
	stop = forgeFrom(peer.String())
	expectNoConnected(time.Second)
	stop()
	got := p.Ignored()
	if got["sender"] == 0 || got["stale"] == 0 {
		t.Errorf("ignored %v: want forged packets counted as sender (another address) and stale (the peer's address)", got)
	}
}

// FuzzDecode checks that decode takes exactly the packets packet makes, a
// probe padded to any size, and nothing else.
func FuzzDecode(f *testing.F) {
	f.Add(packet(kindPing, 1))
	f.Add(packet(kindPong, 1<<63))
	f.Add(packet(kindBye, 42))
	f.Add([]byte("PLHC"))
	f.Add(append(packet(kindPing, 7), 0))
	f.Add(append(packet(kindProbe, 9), make([]byte, 1200)...))
	f.Add(append(packet(kindAccept, 0), make([]byte, acceptanceSize-packetSize)...))
	f.Add(mtuAnnouncement(1340))
	f.Add(append(mtuAnnouncement(1340), 0))
	if b, err := endpointAnnouncement(Endpoint{Addresses: []string{"172.18.0.3"}, Port: 31850}); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, nonce, ok := decode(b)
		if !ok {
			return
		}
		// Only a probe and a view or endpoint announcement, of any size
		// (parseView and parseEndpoint judge the body), an acceptance and an MTU announcement,
		// each of its own size, are longer than the header.
		longer := kind == kindProbe || kind == kindView || kind == kindEndpoint || (kind == kindAccept && len(b) == acceptanceSize) || (kind == kindMTU && len(b) == mtuSize)
		if got := packet(kind, nonce); string(got) != string(b[:len(got)]) || (len(b) != len(got) && !longer) {
			t.Fatalf("decode(%x) = %d, %d, which encodes as %x", b, kind, nonce, got)
		}
	})
}
