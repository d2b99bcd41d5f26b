package exchange

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"

	"github.com/peerlink/peerlink/mcs"
)

// Frame types.
const (
	typeHello  = "hello"
	typeUpsert = "upsert"
	typeDelete = "delete"
	typeSynced = "synced"
	typePing   = "ping"
)

// frame is one message of the protocol.
type frame struct {
	Type    string `json:"type"`
	Version int    `json:"version,omitempty"`
	// Batches, in a hello, says the side ends every batch of changes
	// with a synced frame, and the peer may apply its changes only
	// there: a batch is applied whole or not at all. Without it (older
	// sides) each change is applied as it comes.
	Batches bool         `json:"batches,omitempty"`
	Service *mcs.Service `json:"service,omitempty"`
	Key     *mcs.Key     `json:"key,omitempty"`
}

// Options tune an Exchange; zero values take the defaults.
type Options struct {
	// Limits bound the peer's set; fields left zero take
	// mcs.DefaultLimits'.
	Limits mcs.Limits
	// Now is this side's clock, for the export times the peer sends
	// (default time.Now).
	Now func() time.Time
	// MaxFrame bounds one frame (default 1 MiB).
	MaxFrame int
	// PingInterval is how often an idle side says it is alive (default
	// 5 s); Timeout how long a side waits for a frame before it gives the
	// connection up (default 3 pings).
	PingInterval time.Duration
	Timeout      time.Duration
	// RedialDelay is the pause between a client's connection attempts
	// (default 1 s).
	RedialDelay time.Duration
	// OnPeer receives the peer's set and what was rejected of it, after
	// synced and after each batch of changes. It must not block for long.
	OnPeer func(mcs.Set, []mcs.Rejected)
	// OnRefused is told, by a reason of RefusedReasons, each time the
	// peer's input ends a connection or a stranger's connection is
	// refused. What the connection brought since the peer's last synced
	// is not delivered.
	OnRefused func(reason string)
	Log       logr.Logger
}

// Why connections are refused, as OnRefused is told.
const (
	// RefusedStranger: a connection not from the peer's address.
	RefusedStranger = "stranger"
	// RefusedTooLarge: a frame over MaxFrame, or a set over the limits.
	RefusedTooLarge = "too-large"
	// RefusedMalformed: a frame that is not the protocol.
	RefusedMalformed = "malformed"
	// RefusedTooOften: a connection from the peer sooner than its
	// reconnection budget allows.
	RefusedTooOften = "too-often"
)

// RefusedReasons are the reasons OnRefused is told.
func RefusedReasons() []string {
	return []string{RefusedStranger, RefusedTooLarge, RefusedMalformed, RefusedTooOften}
}

// reconnectBurst is how many connections the peer may open in a row
// before it is held to one per RedialDelay: each new session costs this
// side the sending of its whole set.
const reconnectBurst = 10

// errMalformed marks the errors of frames that are not the protocol.
var errMalformed = errors.New("not the service exchange protocol")

func (o *Options) defaults() {
	o.Limits = o.Limits.WithDefaults()
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxFrame == 0 {
		o.MaxFrame = 1 << 20
	}
	if o.PingInterval == 0 {
		o.PingInterval = 5 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * o.PingInterval
	}
	if o.RedialDelay == 0 {
		o.RedialDelay = time.Second
	}
	if o.OnPeer == nil {
		o.OnPeer = func(mcs.Set, []mcs.Rejected) {}
	}
	if o.OnRefused == nil {
		o.OnRefused = func(string) {}
	}
}

// Exchange keeps the peer up to date with the local set and reports the
// peer's.
type Exchange struct {
	opts Options

	mu      sync.Mutex
	local   mcs.Set
	changed chan struct{} // closed and replaced when local changes
}

// New returns an Exchange with an empty local set.
func New(opts Options) *Exchange {
	opts.defaults()
	return &Exchange{opts: opts, local: mcs.Set{}, changed: make(chan struct{})}
}

// SetLocal replaces the local set; running connections send the
// difference.
func (e *Exchange) SetLocal(s mcs.Set) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.local = maps.Clone(s)
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *Exchange) snapshot() (mcs.Set, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.local, e.changed
}

// Serve accepts the peer's connections on ln until ctx ends, from peer
// only and no more often than its reconnection budget allows; a new
// connection replaces the running one.
func (e *Exchange) Serve(ctx context.Context, ln net.Listener, peer netip.Addr) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	// current stops the running connection's session.
	current := func() {}
	// A new session replaces the running one and costs the sending of the
	// whole local set: a peer reconnecting in a loop gets one per
	// RedialDelay after a short burst, the pace of a well-behaved Dial.
	budget := rate.NewLimiter(rate.Every(e.opts.RedialDelay), reconnectBurst)
	defer func() { current() }()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("service exchange: accept: %w", err)
		}
		from, _ := netip.ParseAddrPort(conn.RemoteAddr().String())
		if from.Addr().Unmap() != peer {
			e.opts.Log.Info("service exchange: connection refused: not from the peer", "from", conn.RemoteAddr().String())
			e.opts.OnRefused(RefusedStranger)
			conn.Close()
			continue
		}
		if !budget.Allow() {
			e.opts.Log.Info("service exchange: connection refused: the peer reconnects faster than once per redial delay",
				"delay", e.opts.RedialDelay.String())
			e.opts.OnRefused(RefusedTooOften)
			conn.Close()
			continue
		}
		current()
		sctx, stop := context.WithCancel(ctx)
		current = stop
		go func() {
			err := e.session(sctx, conn)
			e.opts.Log.V(1).Info("service exchange: connection ended", "error", errString(err))
		}()
	}
}

// Dial connects to the peer at addr from the local address from, and
// again whenever the connection ends, until ctx ends.
func (e *Exchange) Dial(ctx context.Context, from netip.Addr, addr netip.AddrPort) error {
	d := net.Dialer{Timeout: e.opts.Timeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0))}
	for {
		conn, err := d.DialContext(ctx, "tcp", addr.String())
		if err == nil {
			err = e.session(ctx, conn)
		}
		if ctx.Err() != nil {
			return nil
		}
		e.opts.Log.V(1).Info("service exchange: connection to the peer ended; dialing again", "peer", addr.String(), "error", errString(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(e.opts.RedialDelay):
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// session runs one connection until it fails or ctx ends.
func (e *Exchange) session(ctx context.Context, conn net.Conn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		conn.Close()
	}()
	w := &writer{conn: conn, timeout: e.opts.Timeout}
	if err := w.send(frame{Type: typeHello, Version: mcs.Version, Batches: true}); err != nil {
		return err
	}
	r := &reader{br: bufio.NewReader(conn), conn: conn, max: e.opts.MaxFrame, timeout: e.opts.Timeout}
	hello, err := r.next()
	if err != nil {
		return e.refused(err)
	}
	if hello.Type != typeHello || hello.Version != mcs.Version {
		return e.refused(fmt.Errorf("service exchange: the peer opened with %q version %d; this side speaks version %d: %w",
			hello.Type, hello.Version, mcs.Version, errMalformed))
	}
	errs := make(chan error, 2)
	go func() { errs <- e.sendLoop(ctx, w) }()
	go func() { errs <- e.refused(e.receiveLoop(r, hello.Batches)) }()
	err = <-errs
	cancel()
	return err
}

// refused tells OnRefused when err is the peer's input's fault, and
// returns err.
func (e *Exchange) refused(err error) error {
	switch {
	case errors.Is(err, mcs.ErrTooLarge):
		e.opts.OnRefused(RefusedTooLarge)
	case errors.Is(err, errMalformed):
		e.opts.OnRefused(RefusedMalformed)
	default:
		return err
	}
	e.opts.Log.Info("service exchange: connection ended: the peer's input is refused", "error", err.Error())
	return err
}

// sendLoop sends the local set, then what changes, and pings when idle.
func (e *Exchange) sendLoop(ctx context.Context, w *writer) error {
	sent := map[mcs.Key][]byte{}
	synced := false
	for {
		changes := false
		set, changed := e.snapshot()
		for _, s := range set.Sorted() {
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			if old, ok := sent[s.Key]; ok && string(old) == string(b) {
				continue
			}
			if err := w.send(frame{Type: typeUpsert, Service: &s}); err != nil {
				return err
			}
			sent[s.Key] = b
			changes = true
		}
		for _, k := range slices.Collect(maps.Keys(sent)) {
			if _, ok := set[k]; !ok {
				if err := w.send(frame{Type: typeDelete, Key: &k}); err != nil {
					return err
				}
				delete(sent, k)
				changes = true
			}
		}
		// The first synced ends the whole set; each later one a batch
		// of changes.
		if !synced || changes {
			if err := w.send(frame{Type: typeSynced}); err != nil {
				return err
			}
			synced = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-time.After(e.opts.PingInterval):
			if err := w.send(frame{Type: typePing}); err != nil {
				return err
			}
		}
	}
}

// receiveLoop builds the peer's set from its frames and delivers it at
// each synced of a peer that sends batches, or after each frame once
// synced of one that does not.
//
// The peer's services are held within the limits in the order they come:
// one that would take a total past its limit is rejected, and those
// already held stay (the peer's side sends its whole set in key order, so
// a new session keeps the first services by key).
func (e *Exchange) receiveLoop(r *reader, batches bool) error {
	set := mcs.Set{}
	rejected := map[mcs.Key]mcs.Rejected{}
	tally := mcs.NewTally(e.opts.Limits)
	synced := false
	deliver := func() {
		var rej []mcs.Rejected
		for _, k := range slices.SortedFunc(maps.Keys(rejected), mcs.Key.Compare) {
			rej = append(rej, rejected[k])
		}
		e.opts.OnPeer(maps.Clone(set), rej)
	}
	for {
		f, err := r.next()
		if err != nil {
			return err
		}
		switch f.Type {
		case typePing:
			continue
		case typeSynced:
			synced = true
			deliver()
			continue
		case typeUpsert:
			if f.Service == nil {
				return fmt.Errorf("service exchange: upsert without a service: %w", errMalformed)
			}
			s := *f.Service
			// When this side first saw the service is its own to say.
			s.Seen = time.Time{}
			s.Normalize()
			delete(rejected, s.Key)
			delete(set, s.Key)
			tally.Remove(s.Key)
			err := s.Validate(e.opts.Limits, e.opts.Now())
			if err == nil {
				// What the service takes in the set this side stores.
				b, merr := json.Marshal(&s)
				if merr != nil {
					return fmt.Errorf("service exchange: %w", merr)
				}
				err = tally.Add(s.Key, mcs.CostOf(&s, len(b)+1))
			}
			if err != nil {
				rejected[s.Key] = mcs.Rejected{Key: s.Key, Rule: mcs.RuleOf(err), Reason: err.Error()}
			} else {
				set[s.Key] = s
			}
			// Rejections are bounded like the set: past the limit, the
			// peer is only flooding.
			if len(rejected) > e.opts.Limits.Services {
				return fmt.Errorf("service exchange: more than %d services rejected: %w", e.opts.Limits.Services, mcs.ErrTooLarge)
			}
		case typeDelete:
			if f.Key == nil {
				return fmt.Errorf("service exchange: delete without a key: %w", errMalformed)
			}
			delete(set, *f.Key)
			delete(rejected, *f.Key)
			tally.Remove(*f.Key)
		default:
			return fmt.Errorf("service exchange: unknown frame type %q: %w", f.Type, errMalformed)
		}
		if synced && !batches {
			deliver()
		}
	}
}

// writer sends frames.
type writer struct {
	conn    net.Conn
	timeout time.Duration
}

func (w *writer) send(f frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return err
	}
	_, err = w.conn.Write(buf)
	return err
}

// reader reads frames, each within the timeout and at most max bytes.
type reader struct {
	br      *bufio.Reader
	conn    net.Conn
	max     int
	timeout time.Duration
}

func (r *reader) next() (frame, error) {
	var f frame
	if err := r.conn.SetReadDeadline(time.Now().Add(r.timeout)); err != nil {
		return f, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r.br, hdr[:]); err != nil {
		return f, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || int64(n) > int64(r.max) {
		return f, fmt.Errorf("service exchange: frame of %d bytes, at most %d: %w", n, r.max, mcs.ErrTooLarge)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("service exchange: frame: %w: %w", err, errMalformed)
	}
	return f, nil
}
