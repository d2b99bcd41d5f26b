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
	Type    string       `json:"type"`
	Version int          `json:"version,omitempty"`
	Service *mcs.Service `json:"service,omitempty"`
	Key     *mcs.Key     `json:"key,omitempty"`
}

// Options tune an Exchange; zero values take the defaults.
type Options struct {
	// Limits bound the peer's set.
	Limits mcs.Limits
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
	// synced and after each change. It must not block for long.
	OnPeer func(mcs.Set, []mcs.Rejected)
	Log    logr.Logger
}

func (o *Options) defaults() {
	if o.Limits == (mcs.Limits{}) {
		o.Limits = mcs.DefaultLimits
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
// only; a new connection replaces the running one.
func (e *Exchange) Serve(ctx context.Context, ln net.Listener, peer netip.Addr) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	// current stops the running connection's session.
	current := func() {}
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
	if err := w.send(frame{Type: typeHello, Version: mcs.Version}); err != nil {
		return err
	}
	r := &reader{br: bufio.NewReader(conn), conn: conn, max: e.opts.MaxFrame, timeout: e.opts.Timeout}
	hello, err := r.next()
	if err != nil {
		return err
	}
	if hello.Type != typeHello || hello.Version != mcs.Version {
		return fmt.Errorf("service exchange: the peer opened with %q version %d; this side speaks version %d", hello.Type, hello.Version, mcs.Version)
	}
	errs := make(chan error, 2)
	go func() { errs <- e.sendLoop(ctx, w) }()
	go func() { errs <- e.receiveLoop(r) }()
	err = <-errs
	cancel()
	return err
}

// sendLoop sends the local set, then what changes, and pings when idle.
func (e *Exchange) sendLoop(ctx context.Context, w *writer) error {
	sent := map[mcs.Key][]byte{}
	synced := false
	for {
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
		}
		for _, k := range slices.Collect(maps.Keys(sent)) {
			if _, ok := set[k]; !ok {
				if err := w.send(frame{Type: typeDelete, Key: &k}); err != nil {
					return err
				}
				delete(sent, k)
			}
		}
		if !synced {
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

// receiveLoop builds the peer's set from its frames.
func (e *Exchange) receiveLoop(r *reader) error {
	set := mcs.Set{}
	rejected := map[mcs.Key]string{}
	synced := false
	deliver := func() {
		var rej []mcs.Rejected
		for _, k := range slices.SortedFunc(maps.Keys(rejected), mcs.Key.Compare) {
			rej = append(rej, mcs.Rejected{Key: k, Reason: rejected[k]})
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
		case typeUpsert:
			if f.Service == nil {
				return errors.New("service exchange: upsert without a service")
			}
			s := *f.Service
			s.Normalize()
			delete(rejected, s.Key)
			_, known := set[s.Key]
			switch err := s.Validate(e.opts.Limits); {
			case err != nil:
				delete(set, s.Key)
				rejected[s.Key] = err.Error()
			case !known && len(set) >= e.opts.Limits.Services:
				rejected[s.Key] = fmt.Sprintf("the peer exports more than %d services", e.opts.Limits.Services)
			default:
				set[s.Key] = s
			}
			// Rejections are bounded like the set: past the limit, the
			// peer is only flooding.
			if len(rejected) > e.opts.Limits.Services {
				return fmt.Errorf("service exchange: more than %d services rejected: %w", e.opts.Limits.Services, mcs.ErrTooLarge)
			}
		case typeDelete:
			if f.Key == nil {
				return errors.New("service exchange: delete without a key")
			}
			delete(set, *f.Key)
			delete(rejected, *f.Key)
		default:
			return fmt.Errorf("service exchange: unknown frame type %q", f.Type)
		}
		if synced {
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
		return f, fmt.Errorf("service exchange: frame: %w", err)
	}
	return f, nil
}
