package health

import (
	"net/netip"
	"slices"
	"testing"
)

func TestViewAnnouncement(t *testing.T) {
	p := netip.MustParsePrefix
	view := []Mapping{
		{Range: p("10.244.0.0/16"), SeenAs: p("10.71.0.0/16")},
		{Range: p("10.70.0.0/16"), SeenAs: p("10.70.0.0/16")},
		{Range: p("fd00:10:244::/48"), SeenAs: p("fd00:71::/48")},
	}
	b, err := viewAnnouncement(view)
	if err != nil {
		t.Fatal(err)
	}
	kind, _, ok := decode(b)
	if !ok || kind != kindView {
		t.Fatalf("decode: kind %d, ok %v", kind, ok)
	}
	got, err := parseView(b[packetSize:])
	if err != nil || !slices.Equal(got, view) {
		t.Fatalf("parseView: %v, %v; want %v", got, err, view)
	}
	if got, err := parseView([]byte{0}); err != nil || len(got) != 0 {
		t.Errorf("an empty view: %v, %v", got, err)
	}

	full := make([]Mapping, MaxView)
	for i := range full {
		full[i] = Mapping{Range: p("fd00::/48"), SeenAs: p("fd01::/48")}
	}
	if b, err := viewAnnouncement(full); err != nil || len(b) > 1280-28 {
		t.Errorf("a full IPv6 view: %d bytes, %v; want it in one packet of the smallest MTU", len(b), err)
	}
	if _, err := viewAnnouncement(append(full, full[0])); err == nil {
		t.Errorf("a view over MaxView was encoded")
	}
	for _, bad := range []Mapping{
		{Range: p("10.244.0.1/16"), SeenAs: p("10.71.0.0/16")},
		{Range: p("10.244.0.0/16"), SeenAs: p("10.71.0.0/24")},
		{Range: p("10.244.0.0/16"), SeenAs: p("fd00::/16")},
		{Range: p("10.244.0.0/16")},
	} {
		if _, err := viewAnnouncement([]Mapping{bad}); err == nil {
			t.Errorf("%v was encoded", bad)
		}
	}

	// What a peer sends is taken whole or not at all.
	valid := b[packetSize:]
	for name, body := range map[string][]byte{
		"no count":         {},
		"over the bound":   {MaxView + 1},
		"cut short":        valid[:len(valid)-1],
		"trailing bytes":   append(slices.Clone(valid), 0),
		"unknown family":   {1, 5, 16, 10, 0, 0, 0, 10, 0, 0, 0},
		"length over 32":   {1, 4, 33, 10, 0, 0, 0, 10, 0, 0, 0},
		"host bits":        {1, 4, 16, 10, 244, 0, 1, 10, 71, 0, 0},
		"a count too high": {2, 4, 16, 10, 244, 0, 0, 10, 71, 0, 0},
	} {
		if got, err := parseView(body); err == nil {
			t.Errorf("%s: parsed as %v", name, got)
		}
	}
}
