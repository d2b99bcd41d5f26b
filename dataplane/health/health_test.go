package health

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/plan"
)

func listen(t *testing.T) (net.PacketConn, netip.AddrPort) {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return c, c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// pair returns two probers pinging each other over loopback.
func pair(t *testing.T, interval time.Duration) (a, b *Prober) {
	t.Helper()
	ca, aAddr := listen(t)
	cb, bAddr := listen(t)
	return &Prober{Conn: ca, Peer: bAddr, Interval: interval, MaxMisses: 3},
		&Prober{Conn: cb, Peer: aAddr, Interval: interval, MaxMisses: 3}
}

// TestProbers runs two probers against each other, then silences one and
// watches the other go to Error after MaxMisses intervals.
func TestProbers(t *testing.T) {
	a, b := pair(t, 20*time.Millisecond)

	ctxB, stopB := context.WithCancel(context.Background())
	doneB := make(chan error, 1)
	go func() { doneB <- b.Run(ctxB, func(Report) {}) }()

	reports := make(chan Report, 100)
	ctxA, stopA := context.WithCancel(context.Background())
	defer stopA()
	doneA := make(chan error, 1)
	go func() { doneA <- a.Run(ctxA, func(r Report) { reports <- r }) }()

	waitFor := func(want State) Report {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case r := <-reports:
				if r.State == want {
					return r
				}
			case <-deadline:
				t.Fatalf("no report with state %s", want)
			}
		}
	}
	r := waitFor(Connected)
	if r.RTT <= 0 || r.Misses != 0 {
		t.Errorf("connected report %+v: want an RTT and no misses", r)
	}

	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	r = waitFor(Error)
	if r.Misses < 3 {
		t.Errorf("error report %+v: want at least 3 misses", r)
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
}

// TestConnectedAtOnce checks that both sides report Connected within round
// trips of the path coming up, not at the end of an interval: b starts
// first and its first ping is lost (nobody listens yet); a's first ping
// reaches b, which answers and pings back at once.
func TestConnectedAtOnce(t *testing.T) {
	const interval = time.Hour
	a, b := pair(t, interval)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := map[string]chan Report{"a": make(chan Report, 10), "b": make(chan Report, 10)}
	go b.Run(ctx, func(r Report) { reports["b"] <- r })
	time.Sleep(50 * time.Millisecond)
	go a.Run(ctx, func(r Report) { reports["a"] <- r })
	for _, side := range []string{"a", "b"} {
		select {
		case r := <-reports[side]:
			if r.State != Connected || r.RTT <= 0 {
				t.Errorf("first report of %s %+v: want Connected with an RTT", side, r)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no report of %s within 5s although the peer answers and the interval is an hour", side)
		}
	}
}

// TestLateReport checks that a Connected prober whose peer stops answering
// says so within a fraction of the interval, before the interval ends and
// counts a miss, and asks again meanwhile.
func TestLateReport(t *testing.T) {
	const interval = 2 * time.Second
	a, b := pair(t, interval)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctxB, stopB := context.WithCancel(ctx)
	doneB := make(chan error, 1)
	go func() { doneB <- b.Run(ctxB, func(Report) {}) }()
	reports := make(chan Report, 10)
	go a.Run(ctx, func(r Report) { reports <- r })
	if r := <-reports; r.State != Connected {
		t.Fatalf("first report %+v, want Connected", r)
	}
	// The first interval's ping is answered: a ping sent after b stops is
	// the next one, at the first tick.
	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	var sawLate bool
	deadline := time.After(3 * interval)
	for !sawLate {
		select {
		case r := <-reports:
			switch {
			case r.Late:
				sawLate = true
				if r.State != Connected || r.Misses != 0 {
					t.Errorf("late report %+v: want still Connected, no miss", r)
				}
			case r.Misses > 0:
				t.Fatalf("report %+v with a miss came before any late report", r)
			}
		case <-deadline:
			t.Fatal("no late report")
		}
	}
}

func TestFirstReportIsConnectingWithoutPeer(t *testing.T) {
	c, _ := listen(t)
	silent, _ := listen(t)
	defer silent.Close()
	p := &Prober{Conn: c, Peer: silent.LocalAddr().(*net.UDPAddr).AddrPort(), Interval: 10 * time.Millisecond, MaxMisses: 5}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan Report, 10)
	go p.Run(ctx, func(r Report) { got <- r })
	r := <-got
	cancel()
	if r.State != Connecting || r.Misses != 1 {
		t.Errorf("first report without a peer = %+v, want Connecting with one miss", r)
	}
}

// TestGoodbye checks that a prober that stops tells its peer, which reports
// Late at once instead of at its next ping (an hour away here), then every
// AfterGoodbye, and that a prober whose peer never answered stops without
// a word.
func TestGoodbye(t *testing.T) {
	const interval = time.Hour
	a, b := pair(t, interval)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctxB, stopB := context.WithCancel(ctx)
	doneB := make(chan error, 1)
	upB := make(chan Report, 10)
	go func() { doneB <- b.Run(ctxB, func(r Report) { upB <- r }) }()
	reports := make(chan Report, 10)
	go a.Run(ctx, func(r Report) { reports <- r })
	for _, ch := range []chan Report{reports, upB} {
		select {
		case r := <-ch:
			if r.State != Connected {
				t.Fatalf("first report %+v, want Connected", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the probers did not connect")
		}
	}
	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-reports:
		if !r.Late || !r.PeerLeft || r.State != Connected || r.Misses != 0 {
			t.Errorf("report after the peer's goodbye %+v: want Late and PeerLeft, still Connected, no miss", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no report after the peer said goodbye; the next ping is an hour away")
	}
	// Until the peer answers again, late reports come every AfterGoodbye,
	// not every quarter interval (15 minutes here).
	start := time.Now()
	for range 3 {
		select {
		case r := <-reports:
			if !r.Late || !r.PeerLeft {
				t.Errorf("report while the peer is away %+v: want Late and PeerLeft", r)
			}
		case <-time.After(5 * AfterGoodbye):
			t.Fatalf("no late report %v after the last, want one every %v after the peer's goodbye", 5*AfterGoodbye, AfterGoodbye)
		}
	}
	if took := time.Since(start); took < 2*AfterGoodbye {
		t.Errorf("three late reports in %v, want them %v apart", took, AfterGoodbye)
	}

	c, _ := listen(t)
	silent, silentAddr := listen(t)
	defer silent.Close()
	lonely := &Prober{Conn: c, Peer: silentAddr, Interval: interval, MaxMisses: 3}
	ctxL, stopL := context.WithCancel(ctx)
	doneL := make(chan error, 1)
	go func() { doneL <- lonely.Run(ctxL, func(Report) {}) }()
	buf := make([]byte, 64)
	if err := silent.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, _, err := silent.ReadFrom(buf); err != nil || buf[len(magic)] != kindPing {
		t.Fatalf("first packet of a new prober: %q, %v; want a ping", buf[:n], err)
	}
	stopL()
	if err := <-doneL; err != nil {
		t.Fatal(err)
	}
	if err := silent.SetReadDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, _, err := silent.ReadFrom(buf); err == nil {
		t.Errorf("a prober that was never answered sent %q when it stopped, want nothing", buf[:n])
	}
}

// narrowConn is a socket behind a path that silently drops packets larger
// than limit bytes (IP packets, as the tunnel carries them), as a link of a
// smaller MTU does where no "fragmentation needed" comes back.
type narrowConn struct {
	net.PacketConn
	limit atomic.Int64
}

func (c *narrowConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	if int64(len(b)+ipUDPHeaders) > c.limit.Load() {
		return len(b), nil
	}
	return c.PacketConn.WriteTo(b, addr)
}

// TestPathMTU measures a path narrower than the configured MTU, then the
// same path widened again, and a path that carries nothing but pings.
func TestPathMTU(t *testing.T) {
	a, b := pair(t, 20*time.Millisecond)
	narrow := &narrowConn{PacketConn: a.Conn}
	narrow.limit.Store(1232)
	a.Conn = narrow
	a.MTU = func() int { return 1340 }

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = b.Run(ctx, func(Report) {}) }()
	reports := make(chan Report, 100)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, func(r Report) { reports <- r }) }()

	waitFor := func(what string, ok func(Report) bool) {
		t.Helper()
		waitReport(t, reports, what, ok)
	}
	waitFor("path MTU 1232 of 1340", func(r Report) bool { return r.PathMTU == 1232 && r.MTU == 1340 })
	narrow.limit.Store(1500)
	waitFor("path MTU 1340 of 1340", func(r Report) bool { return r.PathMTU == 1340 && r.MTU == 1340 })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestPathMTUUnanswered checks that a path on which no probe is answered
// (only pings pass, or the peer answers no probes) yields no measurement
// rather than the smallest size.
func TestPathMTUUnanswered(t *testing.T) {
	a, b := pair(t, 20*time.Millisecond)
	narrow := &narrowConn{PacketConn: a.Conn}
	narrow.limit.Store(int64(minProbe))
	a.Conn = narrow
	a.MTU = func() int { return 1340 }

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = b.Run(ctx, func(Report) {}) }()
	var mu sync.Mutex
	var last Report
	connected := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- a.Run(ctx, func(r Report) {
			mu.Lock()
			defer mu.Unlock()
			last = r
			if r.State == Connected {
				once.Do(func() { close(connected) })
			}
		})
	}()
	select {
	case <-connected:
	case <-time.After(5 * time.Second):
		t.Fatal("not Connected")
	}
	// Long enough for several searches.
	time.Sleep(500 * time.Millisecond)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if last.State != Connected || last.PathMTU != 0 {
		t.Errorf("last report %+v: want Connected with no path MTU", last)
	}
}

// TestAcceptance has one prober announce the keys it accepts with its pings:
// the other reports them, at most two, the latest first, forgets them a few
// intervals after the announcements stop, and counts an acceptance of the
// wrong size or of the zero key as malformed.
func TestAcceptance(t *testing.T) {
	a, b := pair(t, 20*time.Millisecond)
	keys := [3]plan.Key{{1}, {2}, {3}}
	var announced atomic.Int32
	announced.Store(1)
	a.Accept = func() []plan.Key { return keys[:announced.Load()] }

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = a.Run(ctx, func(Report) {}) }()
	reports := make(chan Report, 100)
	go func() { _ = b.Run(ctx, func(r Report) { reports <- r }) }()
	waitFor := func(what string, ok func([]plan.Key) bool) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case r := <-reports:
				if ok(r.Accepted) {
					return
				}
			case <-deadline:
				t.Fatalf("no report with %s", what)
			}
		}
	}
	waitFor("the first key accepted", func(k []plan.Key) bool { return len(k) == 1 && k[0] == keys[0] })
	announced.Store(3)
	waitFor("two keys accepted", func(k []plan.Key) bool { return len(k) == 2 })
	// Three keys announced, two kept: whichever came last of each
	// announcement round.
	for range 10 {
		if r := <-reports; len(r.Accepted) > maxAccepted {
			t.Fatalf("Accepted = %v: more than %d keys kept", r.Accepted, maxAccepted)
		}
	}
	announced.Store(0)
	waitFor("no key accepted once the announcements stopped", func(k []plan.Key) bool { return len(k) == 0 })

	// Malformed acceptances, from the peer's own address: a's socket.
	before := b.Ignored()["malformed"]
	short := append(packet(kindAccept, 0), make([]byte, 31)...)
	short[packetSize] = 1
	zero := append(packet(kindAccept, 0), make([]byte, 32)...)
	for _, pkt := range [][]byte{short, zero} {
		if _, err := a.Conn.WriteTo(pkt, net.UDPAddrFromAddrPort(a.Peer)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Ignored()["malformed"] < before+2 {
		if time.Now().After(deadline) {
			t.Fatalf("ignored %v: want the two malformed acceptances counted", b.Ignored())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case r := <-reports:
		if len(r.Accepted) != 0 {
			t.Errorf("Accepted = %v after malformed acceptances, want none", r.Accepted)
		}
	case <-time.After(time.Second):
	}
}

// TestMTUAnnouncementWire checks the announcement's encoding: the header
// and the MTU in two bytes, decoded as its kind only at its own size.
func TestMTUAnnouncementWire(t *testing.T) {
	b := mtuAnnouncement(1340)
	if len(b) != mtuSize || b[packetSize] != 1340>>8 || b[packetSize+1] != 1340&0xff {
		t.Fatalf("mtuAnnouncement(1340) = %x: want the header and 0x053c", b)
	}
	if kind, _, ok := decode(b); !ok || kind != kindMTU {
		t.Errorf("decode(%x) = %d, %v: want an MTU announcement", b, kind, ok)
	}
	for _, bad := range [][]byte{b[:mtuSize-1], append(b, 0), packet(kindMTU, 0)} {
		if _, _, ok := decode(bad); ok {
			t.Errorf("decode(%x) accepted an MTU announcement of %d bytes", bad, len(bad))
		}
	}
	for mtu, want := range map[int]bool{575: false, 576: true, 1340: true, 9000: true, 9001: false, 0: false} {
		if got := validMTU(mtu); got != want {
			t.Errorf("validMTU(%d) = %v, want %v", mtu, got, want)
		}
	}
}

// TestMTUAnnouncement has each prober announce its MTU: each reports its
// own and the peer's; an announcement outside the API's bounds or of the
// wrong size is counted as malformed and changes nothing; a peer that
// stops announcing (as one of an earlier release never does) is soon
// unknown again, while the tunnel stays Connected.
func TestMTUAnnouncement(t *testing.T) {
	a, b := pair(t, 20*time.Millisecond)
	var aMTU atomic.Int64
	aMTU.Store(1400)
	a.MTU = func() int { return int(aMTU.Load()) }
	b.MTU = func() int { return 1340 }
	// a also says how it reaches b's ranges: b's pod range remapped, its
	// external range as it is.
	view := []Mapping{
		{Range: netip.MustParsePrefix("10.244.0.0/16"), SeenAs: netip.MustParsePrefix("10.71.0.0/16")},
		{Range: netip.MustParsePrefix("10.70.0.0/16"), SeenAs: netip.MustParsePrefix("10.70.0.0/16")},
	}
	var aView atomic.Pointer[[]Mapping]
	aView.Store(&view)
	a.View = func() []Mapping { return *aView.Load() }

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	aReports := make(chan Report, 100)
	go func() { _ = a.Run(ctx, func(r Report) { aReports <- r }) }()
	bReports := make(chan Report, 100)
	go func() { _ = b.Run(ctx, func(r Report) { bReports <- r }) }()
	waitFor := func(reports chan Report, what string, ok func(Report) bool) {
		t.Helper()
		waitReport(t, reports, what, ok)
	}
	waitFor(bReports, "the peer's MTU 1400 beside its own 1340", func(r Report) bool { return r.PeerMTU == 1400 && r.AnnouncedMTU == 1340 })
	waitFor(aReports, "the peer's MTU 1340 beside its own 1400", func(r Report) bool { return r.PeerMTU == 1340 && r.AnnouncedMTU == 1400 })
	waitFor(bReports, "the peer's view of this side", func(r Report) bool { return slices.Equal(r.PeerView, view) })
	for _, r := range []Report{<-aReports, <-aReports} {
		if r.PeerView != nil {
			t.Fatalf("a announced nothing of b's view, yet reports %v", r.PeerView)
		}
	}

	// Out of bounds, and of the wrong size, from the peer's own address:
	// a's socket.
	good, err := viewAnnouncement(view)
	if err != nil {
		t.Fatal(err)
	}
	sendMalformed(t, a, b, mtuAnnouncement(netv1beta1.MinMTU-1), mtuAnnouncement(netv1beta1.MaxMTU+1), mtuAnnouncement(0), mtuAnnouncement(65535), append(mtuAnnouncement(1500), 0),
		append(slices.Clone(good), 0), good[:len(good)-3], append(packet(kindView, 0), MaxView+1))
	for range 5 {
		if r := <-bReports; r.PeerMTU != 1400 || !slices.Equal(r.PeerView, view) {
			t.Fatalf("report %+v after malformed announcements: want the peer's MTU still 1400 and its view unchanged", r)
		}
	}

	// An MTU outside the bounds is not announced: to the peer, this side
	// announces nothing, as a peer of an earlier release.
	aMTU.Store(0)
	waitFor(bReports, "the peer's MTU unknown once it stopped announcing", func(r Report) bool { return r.PeerMTU == 0 && r.State == Connected })
	// So is a view over MaxView: it is not announced in part.
	tooMany := make([]Mapping, MaxView+1)
	for i := range tooMany {
		tooMany[i] = view[0]
	}
	aView.Store(&tooMany)
	waitFor(bReports, "the peer's view unknown once it stopped announcing", func(r Report) bool { return r.PeerView == nil && r.State == Connected })
}

// sendMalformed sends bad from a's socket, the peer's own address, to b,
// and waits until b has counted each as malformed.
func sendMalformed(t *testing.T, a, b *Prober, bad ...[]byte) {
	t.Helper()
	before := b.Ignored()["malformed"]
	for _, pkt := range bad {
		if _, err := a.Conn.WriteTo(pkt, net.UDPAddrFromAddrPort(a.Peer)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Ignored()["malformed"] < before+uint64(len(bad)) {
		if time.Now().After(deadline) {
			t.Fatalf("ignored %v: want the %d malformed announcements counted", b.Ignored(), len(bad))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitReport waits up to 5 s for a report of reports that ok accepts.
func waitReport(t *testing.T, reports chan Report, what string, ok func(Report) bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case r := <-reports:
			if ok(r) {
				return
			}
		case <-deadline:
			t.Fatalf("no report with %s", what)
		}
	}
}
