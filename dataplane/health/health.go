package health

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
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
}

// Wire format: magic, kind, sequence number. A goodbye is answered with a
// pong of its sequence number, like a ping.
const (
	magic      = "PLHC"
	kindPing   = 1
	kindPong   = 2
	kindBye    = 3
	packetSize = len(magic) + 1 + 8
)

// byeWait is the longest a leaving prober waits for its goodbye to be
// acknowledged.
const byeWait = 200 * time.Millisecond

// Prober pings a peer and answers the peer's pings on one UDP socket.
type Prober struct {
	// Conn is the socket, bound to the health port.
	Conn net.PacketConn
	// Peer is the peer's health address.
	Peer netip.AddrPort
	// Interval between pings; a ping unanswered at the next is a miss.
	Interval time.Duration
	// MaxMisses is the number of misses in a row that makes the state Error.
	MaxMisses int

	// up is signalled when a pong turns the state to Connected, so that
	// Run reports it at once instead of at the end of the interval.
	up chan struct{}
	// left is signalled when the peer says goodbye.
	left chan struct{}
	// byeAcked is signalled when the peer acknowledges our goodbye.
	byeAcked chan struct{}

	mu      sync.Mutex
	seq     uint64
	sent    time.Time
	pending bool
	byeSeq  uint64
	rtt     time.Duration
	state   State
	misses  int
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
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.receive()
	}()
	defer func() {
		p.Conn.Close()
		wg.Wait()
	}()
	peer := net.UDPAddrFromAddrPort(p.Peer)
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
		case <-p.left:
			// The peer goes away (its agent stops): ask at once, so that
			// late reports follow every lateAfter until it answers again.
			p.mu.Lock()
			p.expectAnswer()
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
// a quarter of the interval, or more on a path whose round trips are long.
func (p *Prober) lateAfter() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.Interval/4, 4*p.rtt)
}

// resendPending sends the unanswered ping again while Connected, and
// returns the report that says it is late.
func (p *Prober) resendPending(peer *net.UDPAddr) (Report, bool) {
	p.mu.Lock()
	if !p.pending || p.state != Connected {
		p.mu.Unlock()
		return Report{}, false
	}
	seq := p.seq
	p.sent = time.Now()
	r := Report{State: p.state, RTT: p.rtt, Misses: p.misses, Late: true}
	p.mu.Unlock()
	_, _ = p.Conn.WriteTo(packet(kindPing, seq), peer)
	return r, true
}

// expectAnswer makes a new ping the pending one unless one already is.
// The caller holds mu.
func (p *Prober) expectAnswer() {
	if !p.pending {
		p.seq++
		p.pending = true
	}
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
	p.seq++
	p.byeSeq = p.seq
	seq, wait := p.seq, max(byeWait, 4*p.rtt)
	p.mu.Unlock()
	_, _ = p.Conn.WriteTo(packet(kindBye, seq), peer)
	select {
	case <-p.byeAcked:
	case <-time.After(wait):
	}
}

// current is the state as it stands, in the middle of an interval.
func (p *Prober) current() Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Report{State: p.state, RTT: p.rtt, Misses: p.misses}
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
	return Report{State: p.state, RTT: p.rtt, Misses: p.misses}
}

func (p *Prober) ping(peer *net.UDPAddr) {
	p.mu.Lock()
	p.seq++
	seq := p.seq
	p.sent = time.Now()
	p.pending = true
	p.mu.Unlock()
	// A send that fails (no route while the tunnel is being rebuilt) is a
	// ping that will not be answered: it counts as a miss.
	_, _ = p.Conn.WriteTo(packet(kindPing, seq), peer)
}

func packet(kind byte, seq uint64) []byte {
	b := make([]byte, packetSize)
	copy(b, magic)
	b[len(magic)] = kind
	binary.BigEndian.PutUint64(b[len(magic)+1:], seq)
	return b
}

func (p *Prober) receive() {
	buf := make([]byte, 64)
	for {
		n, from, err := p.Conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if n != packetSize || string(buf[:len(magic)]) != magic {
			continue
		}
		seq := binary.BigEndian.Uint64(buf[len(magic)+1:])
		switch buf[len(magic)] {
		case kindPing:
			_, _ = p.Conn.WriteTo(packet(kindPong, seq), from)
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
			again := p.seq
			p.mu.Unlock()
			if eager {
				_, _ = p.Conn.WriteTo(packet(kindPing, again), net.UDPAddrFromAddrPort(p.Peer))
			}
		case kindBye:
			_, _ = p.Conn.WriteTo(packet(kindPong, seq), from)
			select {
			case p.left <- struct{}{}:
			default:
			}
		case kindPong:
			p.mu.Lock()
			if p.byeSeq != 0 && seq == p.byeSeq {
				select {
				case p.byeAcked <- struct{}{}:
				default:
				}
			}
			if p.pending && seq == p.seq {
				p.pending = false
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
		}
	}
}
