package health

import (
	"context"
	"net"
	"time"
)

// ipUDPHeaders is what an IPv4 packet carries besides its UDP payload: the
// IPv4 header without options and the UDP header. A probe of size n is an
// IP packet of n bytes.
const ipUDPHeaders = 28

// minProbe is the smallest packet the search considers: the size of a
// ping, which passes whenever the tunnel is Connected.
const minProbe = packetSize + ipUDPHeaders

// maxDatagram bounds what the receiver reads: the largest UDP payload. A
// probe of any size up to it is answered; nothing larger exists.
const maxDatagram = 65535

// measurePath finds the path MTU of the tunnel once per interval while the
// tunnel is Connected: a full-size probe at the configured MTU (sent again
// once when unanswered, a single loss proves nothing); when both go
// unanswered, a binary search between the ping's size, which passes, and
// the configured MTU, one probe per step. A result changes the reports at
// once. A search no probe of which is answered (the tunnel went down, or
// the peer does not answer probes) changes nothing.
func (p *Prober) measurePath(ctx context.Context, peer *net.UDPAddr) {
	tick := time.NewTicker(p.Interval)
	defer tick.Stop()
	for {
		if mtu := p.MTU(); mtu >= minProbe && p.connected() {
			if found := p.search(ctx, peer, mtu); found > 0 && p.connected() {
				p.setPathMTU(found, mtu)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// search returns the largest size up to mtu that a probe crosses, or 0
// when no probe was answered.
func (p *Prober) search(ctx context.Context, peer *net.UDPAddr, mtu int) int {
	for range 2 {
		if p.probe(ctx, peer, mtu) {
			return mtu
		}
	}
	found := 0
	lo, hi := minProbe, mtu-1
	for lo < hi && ctx.Err() == nil {
		mid := (lo + hi + 1) / 2
		if p.probe(ctx, peer, mid) {
			lo, found = mid, mid
		} else {
			hi = mid - 1
		}
	}
	return found
}

// probe sends one probe making an IP packet of size bytes, with the
// don't-fragment bit the caller's socket sets, and reports whether the
// peer acknowledged it before a ping would count as late.
func (p *Prober) probe(ctx context.Context, peer *net.UDPAddr, size int) bool {
	nonce := newNonce()
	p.mu.Lock()
	p.probeNonce = nonce
	p.mu.Unlock()
	b := make([]byte, size-ipUDPHeaders)
	copy(b, packet(kindProbe, nonce))
	// A send the kernel refuses (larger than the tunnel link's MTU while
	// it changes, no route while the tunnel is rebuilt) is a probe lost.
	if _, err := p.Conn.WriteTo(b, peer); err != nil {
		return false
	}
	timeout := time.NewTimer(p.lateAfter())
	defer timeout.Stop()
	for {
		select {
		case n := <-p.acks:
			if n == nonce {
				return true
			}
		case <-timeout.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// acknowledged passes the acknowledgment of the probe waiting for one to
// probe; it reports whether nonce was that probe's.
func (p *Prober) acknowledged(nonce uint64) bool {
	p.mu.Lock()
	matched := p.probeNonce != 0 && nonce == p.probeNonce
	if matched {
		p.probeNonce = 0
	}
	p.mu.Unlock()
	if matched {
		select {
		case p.acks <- nonce:
		default:
		}
	}
	return matched
}

// connected reports whether the last ping was answered.
func (p *Prober) connected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == Connected && p.misses == 0
}

// setPathMTU records a measurement and has Run report it when it changed.
func (p *Prober) setPathMTU(pathMTU, mtu int) {
	p.mu.Lock()
	changed := pathMTU != p.pathMTU || mtu != p.mtu
	p.pathMTU, p.mtu = pathMTU, mtu
	p.mu.Unlock()
	if changed {
		select {
		case p.measured <- struct{}{}:
		default:
		}
	}
}
