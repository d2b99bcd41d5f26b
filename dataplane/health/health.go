package health

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/plan"
)

// State is the health of a tunnel.
type State string

// States, as a Connection's status.value spells them.
const (
	Connecting State = "Connecting"
	Connected  State = "Connected"
	Error      State = "Error"
)

// Report is the outcome of one interval.
type Report struct {
	// State of the tunnel.
	State State
	// RTT is the round-trip time of the last answered ping; zero before
	// the first.
	RTT time.Duration
	// Misses counts the pings in a row that went unanswered.
	Misses int
	// Late marks a report made in the middle of an interval because the
	// last ping has waited for its answer much longer than answers take,
	// or because the peer said it is going away: the path may have just
	// broken. State and Misses are unchanged.
	Late bool
	// PeerLeft marks a late report between the peer's goodbye and its
	// next answer; they come every AfterGoodbye (or four round trips).
	PeerLeft bool
	// PathMTU is the largest packet, in bytes, the last measurement saw
	// cross the tunnel, at most MTU; zero before the first measurement.
	PathMTU int
	// MTU is the configured MTU PathMTU was measured against.
	MTU int
	// AnnouncedMTU is the tunnel MTU this side announces to the peer with
	// its pings; zero when it announces none.
	AnnouncedMTU int
	// PeerMTU is the tunnel MTU the peer announces with its pings; zero
	// while unknown: none heard yet, or the peer's last pings came without
	// one (a peer that predates the announcement never sends it).
	PeerMTU int
	// PeerView is how the peer reaches this side's ranges, as it
	// announces with its pings (see View); nil while unknown, as PeerMTU.
	PeerView []Mapping
	// PeerEndpoint is where the peer, a server, says it is reachable from
	// outside its cluster (see Endpoint); zero while unknown, as PeerMTU.
	PeerEndpoint Endpoint
	// Accepted are the keys of this side the peer announced it accepts
	// besides the one the tunnel runs on (key rotation), in the last
	// acceptedFor intervals; at most maxAccepted, the latest first.
	Accepted []plan.Key
}

// Wire format: magic, kind, nonce. Every new ping and goodbye carries a
// fresh random nonce, and only a pong echoing the nonce of the ping (or
// goodbye) still waiting for its answer counts: a pong cannot be forged
// without seeing the ping. A goodbye is answered with a pong of its nonce,
// like a ping. A probe is a ping padded to the size being tested, answered
// by a probe acknowledgment of its nonce; probes are the only packets
// longer than the header. An acceptance is the header (its nonce unused)
// followed by a 32-byte public key of the receiver that the sender accepts
// as the receiver's next key; it is sent with each ping while there is one,
// and not answered. An MTU announcement is the header (its nonce unused)
// followed by the sender's tunnel MTU, two bytes; it follows every ping
// while the sender has an MTU, and is not answered. A view announcement
// (view.go) follows every ping too, while the sender has a view, and so
// does an endpoint announcement (endpoint.go) while it has an endpoint. A packet
// of any other size, magic or kind is ignored, so a peer that predates a
// kind ignores it.
const (
	magic          = "PLHC"
	kindPing       = 1
	kindPong       = 2
	kindBye        = 3
	kindProbe      = 4
	kindProbeAck   = 5
	kindAccept     = 6
	kindMTU        = 7
	packetSize     = len(magic) + 1 + 8
	acceptanceSize = packetSize + len(plan.Key{})
	mtuSize        = packetSize + 2
)

// mtuSilence is how many of the peer's pings in a row may come without an
// MTU announcement before the peer's MTU is unknown again: an announcement
// follows each ping, so only a peer that stopped announcing (replaced by one
// of an earlier release) sends more. While no ping comes (the tunnel is
// down) the last MTU heard stands.
const mtuSilence = 3

// maxAccepted bounds the keys a prober keeps of the peer's acceptances: a
// gateway rotates to one next key at a time, and one more covers a change
// of mind.
const maxAccepted = 2

// acceptedFor is how many intervals an acceptance counts after it was last
// heard: a peer that stops announcing (it dropped the key) is soon no
// longer taken to accept it.
const acceptedFor = 3

// byeWait is the longest a leaving prober waits for its goodbye to be
// acknowledged.
const byeWait = 200 * time.Millisecond

// AfterGoodbye is the pace of the late reports, and so of the caller's
// attempts to reach the peer again, between the peer's goodbye and its
// next answer (at least four round trips): the peer's replacement, a
// standby taking over, answers within a fraction of a second.
const AfterGoodbye = 100 * time.Millisecond

// Prober pings a peer and answers the peer's pings on one UDP socket.
type Prober struct {
	// Conn is the socket, bound to the health port.
	Conn net.PacketConn
	// Peer is the peer's health address. Packets from any other address
	// or port are ignored: only the peer's tunnel address can speak for
	// the peer.
	Peer netip.AddrPort
	// Interval between pings; a ping unanswered at the next is a miss.
	Interval time.Duration
	// MaxMisses is the number of misses in a row that makes the state Error.
	MaxMisses int
	// Accept returns the peer's keys this side accepts besides the one the
	// tunnel runs on, announced to the peer with each ping; nil announces
	// none.
	Accept func() []plan.Key
	// MTU returns the tunnel's configured MTU, the size of the full-size
	// probes that measure the path MTU, announced to the peer after each
	// ping; nil measures and announces nothing. Conn must
	// set the don't-fragment bit (IP_PMTUDISC_PROBE), or the kernel may
	// fragment probes and the measurement sees what fragments carry.
	MTU func() int
	// View returns how this side reaches the peer's ranges: announced to
	// the peer after each ping, at most MaxView mappings; nil announces
	// nothing.
	View func() []Mapping
	// Endpoint returns where this side, a server, is reachable from
	// outside its cluster: announced to the peer after each ping while it
	// is not zero and CheckEndpoint accepts it; nil announces nothing.
	Endpoint func() Endpoint

	// up is signalled when a pong turns the state to Connected, so that
	// Run reports it at once instead of at the end of the interval.
	up chan struct{}
	// left is signalled when the peer says goodbye.
	left chan struct{}
	// byeAcked is signalled when the peer acknowledges our goodbye.
	byeAcked chan struct{}
	// measured is signalled when a path MTU measurement changed.
	measured chan struct{}
	// acks carries the nonce of an acknowledged probe.
	acks chan uint64

	mu sync.Mutex
	// nonce is the nonce of the last ping, which pending says is still
	// unanswered.
	nonce   uint64
	sent    time.Time
	pending bool
	// byeNonce is the nonce of our goodbye, zero before we say it.
	byeNonce uint64
	// peerLeft is set by the peer's goodbye, cleared by its next answer.
	peerLeft bool
	// ignored counts the packets ignored, by reason.
	ignored map[string]uint64
	rtt     time.Duration
	state   State
	misses  int
	// probeNonce is the nonce of the probe waiting for its
	// acknowledgment, zero when none does.
	probeNonce uint64
	// pathMTU and mtu are the last measurement and the configured MTU it
	// was made against.
	pathMTU, mtu int
	// accepted are the keys the peer announced it accepts, the latest
	// first, with when each was heard last.
	accepted []acceptance
	// announcedMTU is the MTU this side announced last; peerMTU the one
	// the peer announced last, and peerSilent the peer's pings since.
	announcedMTU, peerMTU, peerSilent int
	// peerView is the view the peer announced last, and viewSilent the
	// peer's pings since.
	peerView   []Mapping
	viewSilent int
	// peerEndpoint is the endpoint the peer announced last, and
	// endpointSilent the peer's pings since.
	peerEndpoint   Endpoint
	endpointSilent int
}

// acceptance is a key the peer said it accepts, and when it said it last.
type acceptance struct {
	key  plan.Key
	last time.Time
}

// Run pings until ctx ends, calling report after each interval (from one
// goroutine), and answers pings meanwhile. When ctx ends it says goodbye to
// the peer, so that the peer knows at once that the tunnel is going away
// rather than at its next unanswered ping, and waits a moment for the
// acknowledgment: the caller removes the tunnel after Run returns. It
// closes Conn when it returns.
func (p *Prober) Run(ctx context.Context, report func(Report)) error {
	p.state = Connecting
	p.up = make(chan struct{}, 1)
	p.left = make(chan struct{}, 1)
	p.byeAcked = make(chan struct{}, 1)
	p.measured = make(chan struct{}, 1)
	p.acks = make(chan uint64, 1)
	peer := net.UDPAddrFromAddrPort(p.Peer)
	measureCtx, stopMeasuring := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.receive()
	}()
	if p.MTU != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.measurePath(measureCtx, peer)
		}()
	}
	defer func() {
		stopMeasuring()
		p.Conn.Close()
		wg.Wait()
	}()
	tick := time.NewTicker(p.Interval)
	defer tick.Stop()
	late := time.NewTimer(p.lateAfter())
	defer late.Stop()
	p.ping(peer)
	for {
		select {
		case <-ctx.Done():
			p.sayGoodbye(peer)
			return nil
		case <-p.up:
			report(p.current())
			continue
		case <-p.measured:
			report(p.current())
			continue
		case <-p.left:
			// The peer goes away (its agent stops): ask at once, so that
			// late reports follow every lateAfter, at the faster pace
			// AfterGoodbye, until it answers again.
			p.mu.Lock()
			p.expectAnswer()
			p.peerLeft = true
			p.mu.Unlock()
			if r, ok := p.resendPending(peer); ok {
				report(r)
				late.Reset(p.lateAfter())
			}
			continue
		case <-late.C:
			// Ask again in case only the ping was lost, and tell at once
			// rather than at the end of the interval.
			if r, ok := p.resendPending(peer); ok {
				report(r)
				late.Reset(p.lateAfter())
			}
			continue
		case <-tick.C:
		}
		report(p.settle())
		p.ping(peer)
		late.Reset(p.lateAfter())
	}
}

// lateAfter is how long an answer may take before the ping counts as late:
// a quarter of the interval (AfterGoodbye, when shorter, after the peer's
// goodbye), or more on a path whose round trips are long.
func (p *Prober) lateAfter() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	wait := p.Interval / 4
	if p.peerLeft {
		wait = min(wait, AfterGoodbye)
	}
	return max(wait, 4*p.rtt)
}

// resendPending sends the unanswered ping again while Connected, and
// returns the report that says it is late.
func (p *Prober) resendPending(peer *net.UDPAddr) (Report, bool) {
	p.mu.Lock()
	if !p.pending || p.state != Connected {
		p.mu.Unlock()
		return Report{}, false
	}
	nonce := p.nonce
	p.sent = time.Now()
	r := p.reportLocked()
	r.Late, r.PeerLeft = true, p.peerLeft
	p.mu.Unlock()
	p.sendPing(peer, nonce)
	return r, true
}

// expectAnswer makes a new ping the pending one unless one already is.
// The caller holds mu.
func (p *Prober) expectAnswer() {
	if !p.pending {
		p.nonce = newNonce()
		p.pending = true
	}
}

// newNonce returns a random nonce, never zero.
func newNonce() uint64 {
	var b [8]byte
	for {
		// crypto/rand does not fail on the systems Go supports.
		_, _ = rand.Read(b[:])
		if n := binary.BigEndian.Uint64(b[:]); n != 0 {
			return n
		}
	}
}

// IgnoredReasons are the reasons Ignored counts packets by.
func IgnoredReasons() []string { return []string{"sender", "malformed", "stale", "leaving"} }

// Ignored returns how many received packets were ignored, by reason:
// "sender" (not from the peer's address), "malformed" (size, magic or
// kind, the zero key, an MTU outside the API's bounds), "stale" (a pong of no ping, or a probe acknowledgment of no probe,
// waiting for one), "leaving" (a ping after this side's goodbye).
func (p *Prober) Ignored() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.ignored)
}

// ignore counts a packet ignored for reason.
func (p *Prober) ignore(reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ignored == nil {
		p.ignored = map[string]uint64{}
	}
	p.ignored[reason]++
}

// sayGoodbye tells the peer this side is leaving, and waits up to byeWait,
// or four round trips, for the acknowledgment. A peer that never answered
// is not told.
func (p *Prober) sayGoodbye(peer *net.UDPAddr) {
	p.mu.Lock()
	if p.state != Connected {
		p.mu.Unlock()
		return
	}
	p.byeNonce = newNonce()
	nonce, wait := p.byeNonce, max(byeWait, 4*p.rtt)
	p.mu.Unlock()
	_, _ = p.Conn.WriteTo(packet(kindBye, nonce), peer)
	select {
	case <-p.byeAcked:
	case <-time.After(wait):
	}
}

// current is the state as it stands, in the middle of an interval.
func (p *Prober) current() Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reportLocked()
}

// reportLocked is the report of the state as it stands. The caller holds
// mu.
func (p *Prober) reportLocked() Report {
	r := Report{State: p.state, RTT: p.rtt, Misses: p.misses, PathMTU: p.pathMTU, MTU: p.mtu, Accepted: p.acceptedNow(), AnnouncedMTU: p.announcedMTU}
	if p.peerSilent <= mtuSilence {
		r.PeerMTU = p.peerMTU
	}
	if p.viewSilent <= mtuSilence {
		r.PeerView = p.peerView
	}
	if p.endpointSilent <= mtuSilence {
		r.PeerEndpoint = p.peerEndpoint
	}
	return r
}

// settle closes the interval: an unanswered ping counts as a miss.
func (p *Prober) settle() Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending {
		p.misses++
		if p.misses >= p.MaxMisses {
			p.state = Error
		}
	}
	return p.reportLocked()
}

func (p *Prober) ping(peer *net.UDPAddr) {
	p.mu.Lock()
	p.nonce = newNonce()
	nonce := p.nonce
	p.sent = time.Now()
	p.pending = true
	p.mu.Unlock()
	p.sendPing(peer, nonce)
	if p.Accept == nil {
		return
	}
	for _, k := range p.Accept() {
		_, _ = p.Conn.WriteTo(append(packet(kindAccept, 0), k[:]...), peer)
	}
}

// sendPing sends a ping of nonce, followed by the announcement of this
// side's MTU while it has one in the API's bounds. A send that fails (no
// route while the tunnel is being rebuilt) is a ping that will not be
// answered: it counts as a miss.
func (p *Prober) sendPing(peer *net.UDPAddr, nonce uint64) {
	_, _ = p.Conn.WriteTo(packet(kindPing, nonce), peer)
	if p.View != nil {
		// A view that cannot be encoded (more than MaxView ranges) is
		// not announced: the peer shows none rather than a part.
		if b, err := viewAnnouncement(p.View()); err == nil {
			_, _ = p.Conn.WriteTo(b, peer)
		}
	}
	if p.Endpoint != nil {
		if e := p.Endpoint(); !e.IsZero() {
			if b, err := endpointAnnouncement(e); err == nil {
				_, _ = p.Conn.WriteTo(b, peer)
			}
		}
	}
	if p.MTU == nil {
		return
	}
	mtu := p.MTU()
	if !validMTU(mtu) {
		return
	}
	p.mu.Lock()
	p.announcedMTU = mtu
	p.mu.Unlock()
	_, _ = p.Conn.WriteTo(mtuAnnouncement(mtu), peer)
}

// validMTU reports whether mtu is in the API's bounds of a tunnel MTU.
func validMTU(mtu int) bool {
	return mtu >= netv1beta1.MinMTU && mtu <= netv1beta1.MaxMTU
}

// mtuAnnouncement is the packet announcing mtu, which fits in two bytes.
func mtuAnnouncement(mtu int) []byte {
	return binary.BigEndian.AppendUint16(packet(kindMTU, 0), uint16(mtu))
}

// notePeerPing counts a ping of the peer since its last MTU and view
// announcements.
func (p *Prober) notePeerPing() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peerSilent++
	p.viewSilent++
	p.endpointSilent++
}

// notePeerEndpoint records the endpoint the peer announced.
func (p *Prober) notePeerEndpoint(e Endpoint) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peerEndpoint, p.endpointSilent = e, 0
}

// notePeerView records the view the peer announced.
func (p *Prober) notePeerView(view []Mapping) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peerView, p.viewSilent = view, 0
}

// notePeerMTU records the MTU the peer announced.
func (p *Prober) notePeerMTU(mtu int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peerMTU, p.peerSilent = mtu, 0
}

// noteAccepted records that the peer accepts key, the latest first, keeping
// at most maxAccepted keys.
func (p *Prober) noteAccepted(key plan.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.accepted = slices.DeleteFunc(p.accepted, func(a acceptance) bool { return a.key == key })
	p.accepted = slices.Insert(p.accepted, 0, acceptance{key: key, last: time.Now()})
	p.accepted = p.accepted[:min(len(p.accepted), maxAccepted)]
}

// acceptedNow returns the keys the peer announced it accepts within the
// last acceptedFor intervals. The caller holds mu.
func (p *Prober) acceptedNow() []plan.Key {
	var keys []plan.Key
	for _, a := range p.accepted {
		if time.Since(a.last) <= acceptedFor*p.Interval {
			keys = append(keys, a.key)
		}
	}
	return keys
}

func packet(kind byte, nonce uint64) []byte {
	b := make([]byte, packetSize)
	copy(b, magic)
	b[len(magic)] = kind
	binary.BigEndian.PutUint64(b[len(magic)+1:], nonce)
	return b
}

// decode reads a packet; ok is false for anything but the magic, a known
// kind and its size: the header's exactly, at least that for a probe, the
// header and a key for an acceptance, the header and two bytes for an MTU
// announcement.
func decode(b []byte) (kind byte, nonce uint64, ok bool) {
	if len(b) < packetSize || string(b[:len(magic)]) != magic {
		return 0, 0, false
	}
	kind = b[len(magic)]
	switch {
	case kind == kindProbe:
	case kind == kindAccept && len(b) == acceptanceSize:
	case kind == kindMTU && len(b) == mtuSize:
	case kind == kindView && len(b) > packetSize:
	case kind == kindEndpoint && len(b) > packetSize:
	case kind >= kindPing && kind <= kindProbeAck && len(b) == packetSize:
	default:
		return 0, 0, false
	}
	return kind, binary.BigEndian.Uint64(b[len(magic)+1:]), true
}

func (p *Prober) receive() {
	buf := make([]byte, maxDatagram)
	peer := net.UDPAddrFromAddrPort(p.Peer)
	for {
		n, from, err := p.Conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if u, ok := from.(*net.UDPAddr); !ok || u.AddrPort() != p.Peer {
			p.ignore("sender")
			continue
		}
		kind, nonce, ok := decode(buf[:n])
		if !ok {
			p.ignore("malformed")
			continue
		}
		switch kind {
		case kindPing:
			p.notePeerPing()
			// A prober that said goodbye answers no more pings: the peer
			// keeps asking at the goodbye's faster pace until this side's
			// replacement answers.
			p.mu.Lock()
			leaving := p.byeNonce != 0
			p.mu.Unlock()
			if leaving {
				p.ignore("leaving")
				continue
			}
			_, _ = p.Conn.WriteTo(packet(kindPong, nonce), peer)
			// A ping from the peer shows the path works: while not yet
			// Connected, ping back now rather than at the next interval,
			// so that both sides turn Connected within round trips. The
			// pending ping is sent again, not a new one: a new sequence
			// number per received ping would make every pong stale while
			// both sides keep pinging each other.
			p.mu.Lock()
			eager := p.state != Connected
			if eager {
				p.expectAnswer()
				p.sent = time.Now()
			}
			again := p.nonce
			p.mu.Unlock()
			if eager {
				p.sendPing(peer, again)
			}
		case kindAccept:
			key := plan.Key(buf[packetSize:acceptanceSize])
			if key == (plan.Key{}) {
				p.ignore("malformed")
				continue
			}
			p.noteAccepted(key)
		case kindView:
			// What the peer says of this side is taken whole or not at
			// all, and only shown: nothing is routed by it.
			view, err := parseView(buf[packetSize:n])
			if err != nil {
				p.ignore("malformed")
				continue
			}
			p.notePeerView(view)
		case kindEndpoint:
			// Taken whole or not at all; where it may point is the
			// follower's to judge.
			e, err := parseEndpoint(buf[packetSize:n])
			if err != nil {
				p.ignore("malformed")
				continue
			}
			p.notePeerEndpoint(e)
		case kindMTU:
			// What the peer says of itself is bounded as the API bounds
			// a tunnel MTU; anything else is no announcement.
			mtu := int(binary.BigEndian.Uint16(buf[packetSize:mtuSize]))
			if !validMTU(mtu) {
				p.ignore("malformed")
				continue
			}
			p.notePeerMTU(mtu)
		case kindProbe:
			// The answer is small: a probe measures the path towards the
			// peer, and the peer's own probes measure the way back.
			_, _ = p.Conn.WriteTo(packet(kindProbeAck, nonce), peer)
		case kindProbeAck:
			if !p.acknowledged(nonce) {
				p.ignore("stale")
			}
		case kindBye:
			_, _ = p.Conn.WriteTo(packet(kindPong, nonce), peer)
			select {
			case p.left <- struct{}{}:
			default:
			}
		case kindPong:
			p.mu.Lock()
			matched := false
			if p.byeNonce != 0 && nonce == p.byeNonce {
				matched = true
				select {
				case p.byeAcked <- struct{}{}:
				default:
				}
			}
			if p.pending && nonce == p.nonce {
				matched = true
				p.pending = false
				p.peerLeft = false
				p.rtt = time.Since(p.sent)
				p.misses = 0
				if p.state != Connected {
					select {
					case p.up <- struct{}{}:
					default:
					}
				}
				p.state = Connected
			}
			p.mu.Unlock()
			if !matched {
				p.ignore("stale")
			}
		}
	}
}
