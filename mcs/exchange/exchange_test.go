package exchange

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/mcs"
)

// latest keeps the last set a side received.
type latest struct {
	mu       sync.Mutex
	set      mcs.Set
	rejected []mcs.Rejected
	calls    int
}

func (l *latest) onPeer(s mcs.Set, r []mcs.Rejected) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set, l.rejected, l.calls = s, r, l.calls+1
}

// wait polls until check accepts the last set.
func (l *latest) wait(t *testing.T, what string, check func(mcs.Set, []mcs.Rejected) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		ok := l.set != nil && check(l.set, l.rejected)
		l.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Fatalf("%s: last set %v, rejected %v", what, l.set, l.rejected)
}

func service(ns, name string, endpoints int) mcs.Service {
	s := mcs.Service{
		Key:      mcs.Key{Namespace: ns, Name: name},
		Exported: time.Unix(1700000000, 0).UTC(),
		Type:     mcsv1beta1.ClusterSetIP,
		Ports:    []mcs.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}},
	}
	g := mcs.EndpointGroup{Ports: s.Ports}
	for i := range endpoints {
		g.Endpoints = append(g.Endpoints, mcs.Endpoint{IP: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), Ready: true})
	}
	s.Endpoints = []mcs.EndpointGroup{g}
	return s
}

// pair runs a server and a client exchange on loopback.
func pair(t *testing.T, opts Options) (server, client *Exchange, atServer, atClient *latest) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	atServer, atClient = &latest{}, &latest{}
	so, co := opts, opts
	so.OnPeer, so.Log = atServer.onPeer, testr.New(t)
	co.OnPeer, co.Log = atClient.onPeer, testr.New(t)
	server, client = New(so), New(co)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	go func() { _ = server.Serve(ctx, ln, lo) }()
	go func() { _ = client.Dial(ctx, lo, netip.MustParseAddrPort(ln.Addr().String())) }()
	return server, client, atServer, atClient
}

// TestBothWays sends each side's set to the other, then only changes.
func TestBothWays(t *testing.T) {
	server, client, atServer, atClient := pair(t, Options{PingInterval: 50 * time.Millisecond})
	server.SetLocal(mcs.Set{{Namespace: "a", Name: "one"}: service("a", "one", 3)})
	client.SetLocal(mcs.Set{{Namespace: "b", Name: "two"}: service("b", "two", 1)})
	atClient.wait(t, "the client has the server's set", func(s mcs.Set, _ []mcs.Rejected) bool {
		return len(s) == 1 && len(s[mcs.Key{Namespace: "a", Name: "one"}].Endpoints[0].Endpoints) == 3
	})
	atServer.wait(t, "the server has the client's set", func(s mcs.Set, _ []mcs.Rejected) bool {
		_, ok := s[mcs.Key{Namespace: "b", Name: "two"}]
		return len(s) == 1 && ok
	})
	// Scale up, add one, remove one.
	server.SetLocal(mcs.Set{
		{Namespace: "a", Name: "one"}:   service("a", "one", 5),
		{Namespace: "a", Name: "three"}: service("a", "three", 1),
	})
	atClient.wait(t, "the client follows the change", func(s mcs.Set, _ []mcs.Rejected) bool {
		return len(s) == 2 && len(s[mcs.Key{Namespace: "a", Name: "one"}].Endpoints[0].Endpoints) == 5
	})
	server.SetLocal(mcs.Set{{Namespace: "a", Name: "three"}: service("a", "three", 1)})
	atClient.wait(t, "the client drops the unexported service", func(s mcs.Set, _ []mcs.Rejected) bool {
		_, gone := s[mcs.Key{Namespace: "a", Name: "one"}]
		return len(s) == 1 && !gone
	})
}

// TestLimits rejects invalid services and those past the limit, keeping
// the rest.
func TestLimits(t *testing.T) {
	server, _, _, atClient := pair(t, Options{Limits: mcs.Limits{Services: 3, Endpoints: 10}})
	set := mcs.Set{}
	for i := range 5 {
		s := service("a", fmt.Sprintf("s%d", i), 1)
		set[s.Key] = s
	}
	big := service("a", "big", 11)
	set[big.Key] = big
	server.SetLocal(set)
	atClient.wait(t, "three accepted, the rest rejected", func(s mcs.Set, r []mcs.Rejected) bool {
		return len(s) == 3 && len(r) == 3
	})
}

// TestReceiveTotals: the peer's services are held within the totals of
// the limits, in the order they come; one past a total is rejected with
// its rule and the others stand. When this side first saw a service is
// its own to say: a peer's "seen" is dropped, and a forged export time is
// checked against this side's clock.
func TestReceiveTotals(t *testing.T) {
	now := time.Unix(1700000000, 0)
	server, _, _, atClient := pair(t, Options{Limits: mcs.Limits{TotalEndpointGroups: 5}, Now: func() time.Time { return now }})
	set := mcs.Set{}
	for i := range 4 {
		s := service("a", fmt.Sprintf("s%d", i), 1)
		s.Endpoints = append(s.Endpoints, mcs.EndpointGroup{}) // two groups each
		s.Seen = time.Unix(1, 0)
		set[s.Key] = s
	}
	future := service("a", "future", 1)
	future.Exported = now.Add(48 * time.Hour)
	set[future.Key] = future
	server.SetLocal(set)
	atClient.wait(t, "two taken, the rest rejected", func(s mcs.Set, r []mcs.Rejected) bool {
		if len(s) != 2 || len(r) != 3 {
			return false
		}
		for _, svc := range s {
			if !svc.Seen.IsZero() {
				t.Errorf("%s kept the peer's seen time %v", svc.Key, svc.Seen)
			}
		}
		rules := map[string]string{}
		for _, rej := range r {
			rules[rej.Key.Name] = rej.Rule
		}
		want := map[string]string{"future": mcs.RuleInvalid, "s2": mcs.RuleTotalEndpointGroups, "s3": mcs.RuleTotalEndpointGroups}
		if fmt.Sprint(rules) != fmt.Sprint(want) {
			t.Errorf("rejected %v, want %v", rules, want)
		}
		return true
	})
}

// TestHostilePeer: garbage, oversized and unknown frames end the
// connection; nothing of them is delivered.
func TestHostilePeer(t *testing.T) {
	for name, payload := range map[string][]byte{
		"not json":     frameBytes([]byte("{{{{")),
		"unknown type": frameBytes([]byte(`{"type":"shell","version":1}`)),
		"oversized":    binary.BigEndian.AppendUint32(nil, 1<<30),
		"empty frame":  binary.BigEndian.AppendUint32(nil, 0),
	} {
		t.Run(name, func(t *testing.T) {
			got := &latest{}
			e := New(Options{OnPeer: got.onPeer, Timeout: time.Second, Log: testr.New(t)})
			a, b := net.Pipe()
			done := make(chan error, 1)
			go func() { done <- e.session(context.Background(), a) }()
			go func() {
				// The peer's hello, then the payload; whatever e sends is
				// read and dropped.
				go discard(b)
				_, _ = b.Write(frameBytes([]byte(`{"type":"hello","version":1}`)))
				_, _ = b.Write(payload)
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Error("session ended without an error")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("session still running")
			}
			b.Close()
			if got.calls != 0 {
				t.Errorf("delivered %d sets", got.calls)
			}
		})
	}
}

// discard reads c until it fails.
func discard(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

func frameBytes(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// TestRefusesOthers: the server answers only its peer's address.
func TestRefusesOthers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := &latest{}
	e := New(Options{OnPeer: got.onPeer, Log: testr.New(t)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.Serve(ctx, ln, netip.MustParseAddr("169.254.18.2")) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := conn.Read(make([]byte, 16)); err == nil {
		t.Errorf("a stranger got %d bytes", n)
	}
}

// TestBatchWholeOrNothing: a peer that sends batches has each applied
// only at its synced: a batch the peer's input cuts short is not applied,
// the set delivered before it stands, and the refusal is told.
func TestBatchWholeOrNothing(t *testing.T) {
	got := &latest{}
	var mu sync.Mutex
	var refused []string
	e := New(Options{OnPeer: got.onPeer, Timeout: time.Second, Log: testr.New(t), Limits: mcs.Limits{Services: 2, Endpoints: 10},
		OnRefused: func(reason string) {
			mu.Lock()
			defer mu.Unlock()
			refused = append(refused, reason)
		}})
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- e.session(context.Background(), a) }()
	go discard(b)
	upsert := func(name string) []byte {
		return frameBytes(fmt.Appendf(nil, `{"type":"upsert","service":{"namespace":"a","name":%q,"exported":"2023-11-14T22:13:20Z","type":"ClusterSetIP","ports":[{"protocol":"TCP","port":80}]}}`, name))
	}
	var in []byte
	in = append(in, frameBytes([]byte(`{"type":"hello","version":1,"batches":true}`))...)
	in = append(in, upsert("good")...)
	in = append(in, frameBytes([]byte(`{"type":"synced"}`))...)
	// A flood past the limit: two accepted (the limit), the rest
	// rejected until the rejections pass the limit too.
	for i := range 10 {
		in = append(in, upsert(fmt.Sprintf("flood-%d", i))...)
	}
	in = append(in, frameBytes([]byte(`{"type":"synced"}`))...)
	go func() { _, _ = b.Write(in) }()
	select {
	case err := <-done:
		if !errors.Is(err, mcs.ErrTooLarge) {
			t.Errorf("session ended with %v, want too large", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("session still running")
	}
	b.Close()
	got.mu.Lock()
	defer got.mu.Unlock()
	if _, ok := got.set[mcs.Key{Namespace: "a", Name: "good"}]; got.calls != 1 || len(got.set) != 1 || !ok {
		t.Errorf("delivered %d times, last %v; want only the first batch", got.calls, got.set)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 1 || refused[0] != RefusedTooLarge {
		t.Errorf("refusals told: %v", refused)
	}
}

// TestReconnectBudget: a peer reconnecting in a loop gets a few sessions,
// then one per redial delay; the rest are closed unanswered and told.
func TestReconnectBudget(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var refused []string
	delay := 300 * time.Millisecond
	e := New(Options{RedialDelay: delay, Log: testr.New(t), OnRefused: func(reason string) {
		mu.Lock()
		defer mu.Unlock()
		refused = append(refused, reason)
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.Serve(ctx, ln, netip.MustParseAddr("127.0.0.1")) }()
	// answered tells whether a new connection gets the server's hello.
	answered := func() bool {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Read(make([]byte, 4))
		return err == nil
	}
	const attempts = 20
	got := 0
	start := time.Now()
	for range attempts {
		if answered() {
			got++
		}
	}
	// The burst, and at most one more per delay the loop took.
	if most := reconnectBurst + int(time.Since(start)/delay) + 1; got < reconnectBurst || got > most {
		t.Errorf("%d of %d quick connections answered, want %d to %d", got, attempts, reconnectBurst, most)
	}
	mu.Lock()
	n := len(refused)
	for _, r := range refused {
		if r != RefusedTooOften {
			t.Errorf("refusal told as %q", r)
		}
	}
	mu.Unlock()
	if n != attempts-got {
		t.Errorf("%d refusals told for %d connections refused", n, attempts-got)
	}
	time.Sleep(delay + 50*time.Millisecond)
	if !answered() {
		t.Error("a connection after the redial delay is refused")
	}
}
