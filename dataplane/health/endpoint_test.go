package health

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestEndpointAnnouncementWire(t *testing.T) {
	e := Endpoint{Addresses: []string{"172.18.0.3", "gw.peer.example", "2001:db8::7"}, Port: 31850}
	b, err := endpointAnnouncement(e)
	if err != nil {
		t.Fatal(err)
	}
	kind, _, ok := decode(b)
	if !ok || kind != kindEndpoint {
		t.Fatalf("decode: kind %d, ok %v", kind, ok)
	}
	got, err := parseEndpoint(b[packetSize:])
	if err != nil || !got.Equal(e) {
		t.Fatalf("parseEndpoint: %v, %v; want %v", got, err, e)
	}

	// The largest endpoint that may be announced fits one packet of the
	// smallest MTU.
	var most Endpoint
	most.Port = 65535
	for range 6 {
		most.Addresses = append(most.Addresses, strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)+"."+strings.Repeat("c", 63)+".d")
	}
	if err := CheckEndpoint(most); err == nil {
		t.Fatalf("addresses of %d bytes in all accepted", 6*len(most.Addresses[0]))
	}
	most.Addresses = most.Addresses[:5]
	if b, err := endpointAnnouncement(most); err != nil || len(b) > 1280-28 {
		t.Errorf("the largest endpoint: %d bytes, %v; want it in one packet of the smallest MTU", len(b), err)
	}

	for name, bad := range map[string]Endpoint{
		"no port":          {Addresses: []string{"172.18.0.3"}},
		"no address":       {Port: 1},
		"too many":         {Addresses: slices.Repeat([]string{"10.0.0.1"}, MaxEndpointAddresses+1), Port: 1},
		"not a name":       {Addresses: []string{"gw_peer"}, Port: 1},
		"an empty address": {Addresses: []string{""}, Port: 1},
	} {
		if _, err := endpointAnnouncement(bad); err == nil {
			t.Errorf("%s: %v was encoded", name, bad)
		}
	}

	// What a peer sends is taken whole or not at all.
	valid := b[packetSize:]
	for name, body := range map[string][]byte{
		"no count":       valid[:2],
		"no address":     {0x7c, 0x2a, 0},
		"over the bound": {0x7c, 0x2a, MaxEndpointAddresses + 1},
		"cut short":      valid[:len(valid)-1],
		"trailing bytes": append(slices.Clone(valid), 0),
		"a count high":   {0x7c, 0x2a, 2, 3, '1', '.', '1'},
		"port zero":      {0, 0, 1, 8, '1', '0', '.', '0', '.', '0', '.', '1'},
		"not a name":     {0x7c, 0x2a, 1, 3, 'a', '/', 'b'},
	} {
		if got, err := parseEndpoint(body); err == nil {
			t.Errorf("%s: parsed as %v", name, got)
		}
	}
}

// TestEndpointAnnouncement runs two probers, one announcing its endpoint:
// the other reports it, keeps it through malformed announcements, follows
// a change, and forgets it once the peer stops announcing.
func TestEndpointAnnouncement(t *testing.T) {
	a, b := pair(t, 20*time.Millisecond)
	first := Endpoint{Addresses: []string{"172.18.0.3", "172.18.0.4"}, Port: 31850}
	var announced atomic.Pointer[Endpoint]
	announced.Store(&first)
	a.Endpoint = func() Endpoint { return *announced.Load() }

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = a.Run(ctx, func(Report) {}) }()
	reports := make(chan Report, 100)
	go func() { _ = b.Run(ctx, func(r Report) { reports <- r }) }()
	waitReport(t, reports, "the peer's endpoint", func(r Report) bool { return r.PeerEndpoint.Equal(first) })

	good, err := endpointAnnouncement(first)
	if err != nil {
		t.Fatal(err)
	}
	sendMalformed(t, a, b, append(slices.Clone(good), 0), good[:len(good)-2], append(packet(kindEndpoint, 0), 0, 0, 1, 1, '1'))
	for range 3 {
		if r := <-reports; !r.PeerEndpoint.Equal(first) {
			t.Fatalf("report %+v after malformed announcements: want the peer's endpoint unchanged", r)
		}
	}

	moved := Endpoint{Addresses: []string{"172.18.0.3", "172.18.0.4"}, Port: 32011}
	announced.Store(&moved)
	waitReport(t, reports, "the peer's new endpoint", func(r Report) bool { return r.PeerEndpoint.Equal(moved) })

	announced.Store(&Endpoint{})
	waitReport(t, reports, "the peer's endpoint unknown once it stopped announcing", func(r Report) bool { return r.PeerEndpoint.IsZero() && r.State == Connected })
}
