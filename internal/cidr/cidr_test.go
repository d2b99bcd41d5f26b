package cidr

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
)

func TestParseNetwork(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    string
		hostErr bool
		err     bool
	}{
		{in: "10.244.0.0/16", want: "10.244.0.0/16"},
		{in: "0.0.0.0/0", want: "0.0.0.0/0"},
		{in: "fd00::/64", want: "fd00::/64"},
		{in: "::ffff:10.244.0.0/112", want: "10.244.0.0/16"},
		{in: "10.244.1.0/16", hostErr: true, err: true},
		{in: "10.244.0.0", err: true},
		{in: "10.244.0.0/33", err: true},
		{in: "::ffff:10.0.0.0/80", err: true},
		{in: "", err: true},
	} {
		got, err := ParseNetwork(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("ParseNetwork(%q) = %v, want an error", tc.in, got)
			}
			if errors.Is(err, ErrHostBits) != tc.hostErr {
				t.Errorf("ParseNetwork(%q) error %v: errors.Is(ErrHostBits) = %v, want %v", tc.in, err, !tc.hostErr, tc.hostErr)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseNetwork(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestFirstOverlap(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []netip.Prefix
		i, j int
		ok   bool
	}{
		{name: "empty"},
		{name: "disjoint", in: MustPrefixes("10.244.0.0/16", "10.96.0.0/12", "10.70.0.0/16", "10.80.0.0/16")},
		{name: "adjacent", in: MustPrefixes("10.0.0.0/24", "10.0.1.0/24")},
		{name: "nested", in: MustPrefixes("10.96.0.0/12", "10.70.0.0/16", "10.100.0.0/16"), i: 0, j: 2, ok: true},
		{name: "equal", in: MustPrefixes("10.70.0.0/16", "10.80.0.0/16", "10.70.0.0/16"), i: 0, j: 2, ok: true},
		{name: "nested in an earlier neighbour", in: MustPrefixes("10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24"), i: 0, j: 1, ok: true},
		{name: "families never overlap", in: MustPrefixes("10.0.0.0/8", "::/0")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, j, ok := FirstOverlap(tc.in)
			if ok != tc.ok || (ok && (i != tc.i || j != tc.j)) {
				t.Errorf("FirstOverlap(%v) = %d, %d, %v; want %d, %d, %v", tc.in, i, j, ok, tc.i, tc.j, tc.ok)
			}
		})
	}
}

// TestFirstOverlapAgreesWithPairs checks the sorted scan against comparing
// every pair, on random sets of small prefixes that often overlap.
func TestFirstOverlapAgreesWithPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		ps := make([]netip.Prefix, rng.IntN(8))
		for k := range ps {
			bits := 20 + rng.IntN(9)
			a := netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(16)), 0})
			ps[k] = netip.PrefixFrom(a, bits).Masked()
		}
		anyPair := false
		for a := range ps {
			for b := a + 1; b < len(ps); b++ {
				anyPair = anyPair || ps[a].Overlaps(ps[b])
			}
		}
		i, j, ok := FirstOverlap(ps)
		if ok != anyPair {
			t.Fatalf("FirstOverlap(%v) ok = %v, pairwise check says %v", ps, ok, anyPair)
		}
		if ok && (i >= j || !ps[i].Overlaps(ps[j])) {
			t.Fatalf("FirstOverlap(%v) = %d, %d: not an overlapping pair", ps, i, j)
		}
	}
}

func TestTranslate(t *testing.T) {
	for _, tc := range []struct {
		addr, from, to string
		want           string
		err            bool
	}{
		{addr: "10.244.1.7", from: "10.244.0.0/16", to: "10.71.0.0/16", want: "10.71.1.7"},
		{addr: "10.244.0.0", from: "10.244.0.0/16", to: "10.71.0.0/16", want: "10.71.0.0"},
		{addr: "10.244.255.255", from: "10.244.0.0/16", to: "192.168.0.0/16", want: "192.168.255.255"},
		{addr: "10.244.0.77", from: "10.244.0.64/26", to: "172.16.3.128/26", want: "172.16.3.141"},
		{addr: "10.244.3.9", from: "10.244.0.0/22", to: "10.8.4.0/22", want: "10.8.7.9"},
		{addr: "10.1.2.3", from: "10.1.2.3/32", to: "10.9.9.9/32", want: "10.9.9.9"},
		{addr: "fd00::1:2", from: "fd00::/64", to: "fd99:1::/64", want: "fd99:1::1:2"},
		{addr: "10.245.0.1", from: "10.244.0.0/16", to: "10.71.0.0/16", err: true},
		{addr: "10.244.0.1", from: "10.244.0.0/16", to: "10.71.0.0/24", err: true},
		{addr: "10.244.0.1", from: "10.244.0.0/16", to: "fd00::/112", err: true},
	} {
		got, err := Translate(netip.MustParseAddr(tc.addr), netip.MustParsePrefix(tc.from), netip.MustParsePrefix(tc.to))
		if tc.err {
			if err == nil {
				t.Errorf("Translate(%s, %s, %s) = %s, want an error", tc.addr, tc.from, tc.to, got)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("Translate(%s, %s, %s) = %v, %v; want %s", tc.addr, tc.from, tc.to, got, err, tc.want)
		}
	}
}

// TestTranslateRoundTrip checks that translating there and back gives the
// address again, for every prefix length.
func TestTranslateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		bits := rng.IntN(33)
		var ra, rb [4]byte
		for k := range ra {
			ra[k], rb[k] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		from := netip.PrefixFrom(netip.AddrFrom4(ra), bits).Masked()
		to := netip.PrefixFrom(netip.AddrFrom4(rb), bits).Masked()
		addr := netip.AddrFrom4(ra)
		there, err := Translate(addr, from, to)
		if err != nil || !to.Contains(there) {
			t.Fatalf("Translate(%s, %s, %s) = %v, %v: want an address in %s", addr, from, to, there, err, to)
		}
		back, err := Translate(there, to, from)
		if err != nil || back != addr {
			t.Fatalf("Translate back(%s, %s, %s) = %v, %v; want %s", there, to, from, back, err, addr)
		}
	}
}
