package ipam

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/internal/cidr"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// localRanges are the facts of a typical cluster: pod, service, external and
// internal CIDRs.
func localRanges() []netip.Prefix {
	return cidr.MustPrefixes("10.244.0.0/16", "10.96.0.0/12", "10.70.0.0/16", "10.80.0.0/16")
}

// localRanges6 are the IPv6 ranges of a dual-stack cluster: pod and
// service CIDRs.
func localRanges6() []netip.Prefix {
	return cidr.MustPrefixes("fd44:1::/48", "fd96:1::/112")
}

// testPlan is the address plan of most tests: the private and shared ranges
// and an IPv6 ULA, so that a free range is kept as it is.
func testPlan() []netip.Prefix {
	return cidr.MustPrefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fd00::/8")
}

// newAllocator returns an allocator with testPlan as its plan.
func newAllocator(t *testing.T, pools, taken []netip.Prefix) *Allocator {
	t.Helper()
	return newPlanned(t, pools, testPlan(), taken)
}

func newPlanned(t *testing.T, pools, plan, taken []netip.Prefix) *Allocator {
	t.Helper()
	a, err := NewPlanned(pools, plan, taken)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func mustAllocate(t *testing.T, a *Allocator, want string) netip.Prefix {
	t.Helper()
	got, err := a.Allocate(pfx(want))
	if err != nil {
		t.Fatalf("Allocate(%s): %v", want, err)
	}
	return got
}

// TestAllocate asks an allocator for ranges one after the other, each
// against what the earlier ones took.
func TestAllocate(t *testing.T) {
	// A step asks for want and gets got; exhausted stands for ErrExhausted.
	type step struct{ want, got string }
	const exhausted = ""
	for _, tc := range []struct {
		name string
		// pools are DefaultPools when nil.
		pools, taken []netip.Prefix
		// plan is testPlan unless noPlan; noPlan is the empty plan.
		plan   []netip.Prefix
		noPlan bool
		// steps are the ranges asked for, in order.
		steps []step
	}{
		{name: "free ranges are kept", taken: localRanges(), steps: []step{
			{"10.245.0.0/16", "10.245.0.0/16"},
			{"172.20.0.0/16", "172.20.0.0/16"},
			{"100.64.0.0/16", "100.64.0.0/16"},
			{"fd00::/64", "fd00::/64"},
		}},
		{name: "collisions are remapped", taken: localRanges(), steps: []step{
			// The pod CIDR both clusters use: the first free /16 of 10/8.
			{"10.244.0.0/16", "10.0.0.0/16"},
			// The peer's external CIDR collides with ours.
			{"10.70.0.0/16", "10.1.0.0/16"},
			// Same CIDR from two more peers: two more distinct blocks.
			{"10.244.0.0/16", "10.2.0.0/16"},
			{"10.244.0.0/16", "10.3.0.0/16"},
			// A smaller block fits after the /16s.
			{"10.244.0.0/24", "10.4.0.0/24"},
			// A range overlapping a local range only in part is remapped too.
			{"10.64.0.0/11", "10.32.0.0/11"},
			// Colliding with an earlier allocation that was itself kept.
			{"10.4.0.0/24", "10.4.1.0/24"},
		}},
		{name: "outside the pools", taken: cidr.MustPrefixes("100.64.0.0/16"), steps: []step{
			// Colliding: remapped into the pools.
			{"100.64.0.0/16", "10.0.0.0/16"},
			// Free: kept.
			{"100.65.0.0/16", "100.65.0.0/16"},
		}},
		{name: "on to the next pool", taken: cidr.MustPrefixes("10.0.0.0/8"), steps: []step{
			{"10.244.0.0/16", "172.16.0.0/16"},
			{"10.244.0.0/17", "172.17.0.0/17"},
			{"10.244.0.0/16", "172.18.0.0/16"},
			{"10.244.0.0/14", "172.20.0.0/14"},
			{"10.244.0.0/16", "172.19.0.0/16"},
			// 172.24.0.0/13 holds AWS's resolver (172.31.0.0/30), and
			// 192.168/16 is too small.
			{"10.240.0.0/13", exhausted},
			{"10.240.0.0/14", "172.24.0.0/14"},
			{"10.240.0.0/15", "172.28.0.0/15"},
			{"10.244.0.0/16", "172.30.0.0/16"},
			// 172.31/16 holds the resolver: the last pool.
			{"10.244.0.0/16", "192.168.0.0/16"},
			// A /17 is still free in 172.16/12, a /16 nowhere.
			{"10.244.0.0/17", "172.17.128.0/17"},
			{"10.0.0.0/16", exhausted},
		}},
		{name: "exhausted", pools: cidr.MustPrefixes("10.0.0.0/23"), taken: cidr.MustPrefixes("10.0.0.0/24", "fd00::/64"), steps: []step{
			{"10.0.0.0/24", "10.0.1.0/24"},
			{"10.0.0.0/24", exhausted},
			{"10.0.0.0/22", exhausted},
			{"fd00::/64", exhausted},
			// A free range is kept even with full pools.
			{"192.168.0.0/24", "192.168.0.0/24"},
		}},
		// The default: no plan, nothing is routed as it is, whatever it
		// collides with.
		{name: "without a plan every range is remapped", noPlan: true, taken: localRanges(), steps: []step{
			{"10.245.0.0/16", "10.0.0.0/16"},
			{"172.20.0.0/16", "10.1.0.0/16"},
			{"192.168.0.0/16", "10.2.0.0/16"},
			{"100.64.0.0/10", "10.128.0.0/10"},
			{"172.31.0.0/30", "10.3.0.0/30"},
			{"100.100.0.0/16", "10.4.0.0/16"},
			// The pools' first blocks are free: remapping may give a
			// range its own address, a block of the pools all the same.
			{"10.5.0.0/16", "10.5.0.0/16"},
			{"fd00::/64", "fd00::/64"},
			{"fd00::/64", "fd00:0:0:1::/64"},
		}},
		// IPv6: the local pod range of the lab's cluster 1 (fd44:1::/48)
		// and an IPv6 service range, taken beside the IPv4 ones.
		{name: "IPv6 collisions are remapped into fd00::/8", noPlan: true, taken: slices.Concat(localRanges(), localRanges6()), steps: []step{
			// The peer's pod range is ours: the first free /48 of fd00::/8.
			{"fd44:1::/48", "fd00::/48"},
			{"fd44:1::/48", "fd00:0:1::/48"},
			// A smaller block after them, then a larger one aligned to
			// its length, and one the size of the whole service range.
			{"fd44:1:5::/64", "fd00:0:2::/64"},
			{"fd44::/32", "fd00:1::/32"},
			{"fd96:1::/112", "fd00:0:2:1::/112"},
			// The IPv4 ranges are not disturbed by the IPv6 ones.
			{"10.244.0.0/16", "10.0.0.0/16"},
		}},
		{name: "IPv6 free ranges are kept inside the plan", taken: slices.Concat(localRanges(), localRanges6()), steps: []step{
			{"fd44:2::/48", "fd44:2::/48"},
			{"fd00::/48", "fd00::/48"},
			// Colliding with the local pod range, then with the range
			// just kept: remapped to the next free blocks.
			{"fd44:1::/48", "fd00:0:1::/48"},
			{"fd44:2::/56", "fd00:0:2::/56"},
			// Outside the plan (a GUA an allowlist let in): remapped.
			{"2a01:4f8::/48", "fd00:0:3::/48"},
		}},
		// An IPv6 range holding the IPv4-mapped addresses, where the
		// allocator keeps IPv4 ones, takes none of the IPv4 pools.
		{name: "an IPv6 range takes no IPv4 range", noPlan: true, taken: cidr.MustPrefixes("::/64", "::/0"),
			pools: cidr.MustPrefixes("10.0.0.0/8", "fd00::/8"), steps: []step{
				{"10.244.0.0/16", "10.0.0.0/16"},
				{"fd44::/48", exhausted},
			}},
		{name: "IPv6 pool exhausted", pools: cidr.MustPrefixes("10.0.0.0/8", "fd00::/47"), noPlan: true, taken: localRanges6(), steps: []step{
			{"fd44:1::/48", "fd00::/48"},
			{"fd44:1::/48", "fd00:0:1::/48"},
			{"fd44:1::/48", exhausted},
			{"fd44::/46", exhausted},
			// The other family is not affected.
			{"10.244.0.0/16", "10.0.0.0/16"},
		}},
		{name: "kept only inside the plan", plan: cidr.MustPrefixes("172.20.0.0/14", "10.200.0.0/16"), taken: localRanges(), steps: []step{
			{"172.20.0.0/16", "172.20.0.0/16"},
			{"172.22.5.0/24", "172.22.5.0/24"},
			{"10.200.0.0/16", "10.200.0.0/16"},
			// Holding the plan, or beside it: remapped.
			{"172.16.0.0/12", "10.0.0.0/12"},
			{"172.16.0.0/13", "10.16.0.0/13"},
			{"10.201.0.0/16", "10.24.0.0/16"},
			{"192.168.0.0/24", "10.25.0.0/24"},
			// In the plan but colliding with an earlier one: remapped.
			{"172.20.0.0/16", "10.26.0.0/16"},
		}},
		// Cloud service addresses are taken ranges, inside the plan too.
		{name: "never on a cloud service address", pools: cidr.MustPrefixes("172.31.0.0/29", "100.100.0.0/15"),
			plan: cidr.MustPrefixes("100.64.0.0/10", "172.16.0.0/12", "168.63.0.0/16"), steps: []step{
				// In the plan, each on or holding a service address:
				// remapped, and never onto one.
				{"172.31.0.0/30", "172.31.0.4/30"},
				{"100.100.100.0/24", "100.101.0.0/24"},
				{"168.63.129.0/24", "100.101.1.0/24"},
				{"172.31.0.0/16", exhausted},
				{"100.64.0.0/10", exhausted},
				// Beside them: kept.
				{"168.63.128.0/24", "168.63.128.0/24"},
				{"100.64.0.0/16", "100.64.0.0/16"},
				{"172.31.0.8/29", "172.31.0.8/29"},
			}},
		// Overlapping and touching local ranges are all kept out.
		{name: "taken ranges may overlap", pools: cidr.MustPrefixes("10.0.0.0/16"),
			taken: cidr.MustPrefixes("10.0.1.0/24", "10.0.0.0/23", "10.0.2.0/24", "10.0.2.128/25", "10.0.4.0/24"),
			steps: []step{
				{"10.0.0.0/24", "10.0.3.0/24"},
				{"10.0.0.0/24", "10.0.5.0/24"},
				{"10.0.0.0/24", "10.0.6.0/24"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pools == nil {
				tc.pools = DefaultPools()
			}
			switch {
			case tc.noPlan:
				tc.plan = nil
			case tc.plan == nil:
				tc.plan = testPlan()
			}
			a := newPlanned(t, tc.pools, tc.plan, tc.taken)
			for _, s := range tc.steps {
				got, err := a.Allocate(pfx(s.want))
				if s.got == exhausted {
					if !errors.Is(err, ErrExhausted) {
						t.Errorf("Allocate(%s) = %v, %v; want ErrExhausted", s.want, got, err)
					}
				} else if err != nil || got.String() != s.got {
					t.Errorf("Allocate(%s) = %v, %v; want %s", s.want, got, err, s.got)
				}
			}
		})
	}
}

func TestReleasedRangeIsReused(t *testing.T) {
	a := newAllocator(t, DefaultPools(), localRanges())
	first := mustAllocate(t, a, "10.244.0.0/16")
	second := mustAllocate(t, a, "10.244.0.0/16")
	// A third one, so that the released range is a hole between two.
	mustAllocate(t, a, "10.244.0.0/16")
	if err := a.Release(second); err != nil {
		t.Fatalf("Release(%s): %v", second, err)
	}
	if got := mustAllocate(t, a, "10.244.0.0/16"); got != second {
		t.Errorf("after releasing %s the next peer got %s, want the released range", second, got)
	}
	if err := a.Release(first); err != nil {
		t.Fatalf("Release(%s): %v", first, err)
	}
	// A smaller block goes to the lowest free address, inside the hole.
	if got := mustAllocate(t, a, "10.244.0.0/24"); got.String() != "10.0.0.0/24" {
		t.Errorf("Allocate /24 after releasing %s = %s, want 10.0.0.0/24", first, got)
	}
}

func TestReleaseErrors(t *testing.T) {
	a := newAllocator(t, DefaultPools(), localRanges())
	got := mustAllocate(t, a, "10.244.0.0/16")
	for _, p := range []netip.Prefix{pfx("10.244.0.0/16"), pfx("10.0.0.0/17"), pfx("10.96.0.0/12")} {
		if err := a.Release(p); !errors.Is(err, ErrNotAllocated) {
			t.Errorf("Release(%s) = %v, want ErrNotAllocated", p, err)
		}
	}
	if err := a.Release(got); err != nil {
		t.Fatalf("Release(%s): %v", got, err)
	}
	if err := a.Release(got); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("second Release(%s) = %v, want ErrNotAllocated", got, err)
	}
}

func TestClaim(t *testing.T) {
	a := newAllocator(t, DefaultPools(), localRanges())
	if err := a.Claim(pfx("10.0.0.0/16")); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	for _, p := range []string{"10.0.0.0/16", "10.0.3.0/24", "10.244.0.0/16", "10.100.0.0/16"} {
		if err := a.Claim(pfx(p)); !errors.Is(err, ErrOverlap) {
			t.Errorf("Claim(%s) = %v, want ErrOverlap", p, err)
		}
	}
	if got := mustAllocate(t, a, "10.244.0.0/16"); got.String() != "10.1.0.0/16" {
		t.Errorf("Allocate after Claim(10.0.0.0/16) = %s, want 10.1.0.0/16", got)
	}
	if err := a.Release(pfx("10.0.0.0/16")); err != nil {
		t.Errorf("Release of a claimed range: %v", err)
	}
	// A range kept as it is under another plan: neither in a pool nor in
	// this plan.
	b := newPlanned(t, DefaultPools(), cidr.MustPrefixes("100.64.0.0/16"), nil)
	if err := b.Claim(pfx("100.65.0.0/16")); !errors.Is(err, ErrOutside) {
		t.Errorf("Claim outside the pools and the plan = %v, want ErrOutside", err)
	}
	if err := b.Claim(pfx("100.64.3.0/24")); err != nil {
		t.Errorf("Claim inside the plan: %v", err)
	}
	if err := b.Claim(pfx("172.31.0.0/24")); !errors.Is(err, ErrOverlap) {
		t.Errorf("Claim over a cloud service address = %v, want ErrOverlap", err)
	}
}

// TestExhaustedNamesThePools checks that running out says which pools of
// which family were searched, or that the family has none.
func TestExhaustedNamesThePools(t *testing.T) {
	a := newPlanned(t, cidr.MustPrefixes("10.0.0.0/24", "fd00::/64", "fd01::/64"), nil, nil)
	for _, tc := range []struct{ want, msg string }{
		{"fd44::/48", "allocate for fd44::/48: no free block of that length in the pools (IPv6 pools: fd00::/64,fd01::/64)"},
		{"10.244.0.0/16", "allocate for 10.244.0.0/16: no free block of that length in the pools (IPv4 pools: 10.0.0.0/24)"},
	} {
		if _, err := a.Allocate(pfx(tc.want)); !errors.Is(err, ErrExhausted) || err.Error() != tc.msg {
			t.Errorf("Allocate(%s) = %v, want ErrExhausted saying %q", tc.want, err, tc.msg)
		}
	}
	v4 := newPlanned(t, cidr.MustPrefixes("10.0.0.0/8"), nil, nil)
	if _, err := v4.Allocate(pfx("fd44::/48")); !errors.Is(err, ErrExhausted) || !strings.HasSuffix(err.Error(), "(no IPv6 pool)") {
		t.Errorf("Allocate of an IPv6 range without an IPv6 pool = %v, want ErrExhausted saying there is none", err)
	}
}

func TestPoolsOrDefault(t *testing.T) {
	for _, tc := range []struct{ pools, want string }{
		{"", "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fd00::/8"},
		{"10.128.0.0/9", "10.128.0.0/9,fd00::/8"},
		{"fd12::/16", "fd12::/16,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16"},
		{"fd12::/16,172.16.0.0/12", "fd12::/16,172.16.0.0/12"},
	} {
		var pools []netip.Prefix
		if tc.pools != "" {
			pools = cidr.MustPrefixes(strings.Split(tc.pools, ",")...)
		}
		got := PoolsOrDefault(pools)
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if strings.Join(s, ",") != tc.want {
			t.Errorf("PoolsOrDefault(%s) = %v, want %s", tc.pools, got, tc.want)
		}
	}
}

func TestInvalidInput(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pools, taken []netip.Prefix
		invalid      bool
	}{
		{name: "pool with host bits", pools: cidr.MustPrefixes("10.0.0.1/8"), invalid: true},
		{name: "zero pool", pools: []netip.Prefix{{}}, invalid: true},
		{name: "taken with host bits", pools: DefaultPools(), taken: cidr.MustPrefixes("10.244.1.0/16"), invalid: true},
		{name: "overlapping pools", pools: cidr.MustPrefixes("10.0.0.0/8", "10.1.0.0/16")},
		{name: "overlapping IPv6 pools", pools: cidr.MustPrefixes("10.0.0.0/8", "fd00::/8", "fd00:1::/32")},
		// The IPv6 form of IPv4 addresses, which would alias 10.0.0.0/8.
		{name: "IPv4-mapped pool", pools: cidr.MustPrefixes("::ffff:0:0/96")},
		{name: "pool holding the IPv4-mapped range", pools: cidr.MustPrefixes("::/64")},
	} {
		_, err := New(tc.pools, tc.taken)
		if err == nil || errors.Is(err, ErrInvalid) != tc.invalid {
			t.Errorf("%s: New = %v, want an error (ErrInvalid: %v)", tc.name, err, tc.invalid)
		}
	}
	a := newAllocator(t, DefaultPools(), nil)
	for _, p := range []netip.Prefix{pfx("10.244.1.0/16"), {}} {
		if _, err := a.Allocate(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("Allocate(%v) = %v, want ErrInvalid", p, err)
		}
		if err := a.Claim(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("Claim(%v) = %v, want ErrInvalid", p, err)
		}
	}
}

// model is a plain reference allocator: it checks every block of every pool
// against every taken range, so it is obviously right and slow.
type model struct {
	pools, plan, taken, given []netip.Prefix
}

// inPlan reports whether p lies inside an entry of the plan.
func (m *model) inPlan(p netip.Prefix) bool {
	for _, q := range m.plan {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

func (m *model) overlapsAny(p netip.Prefix) bool {
	for _, q := range slices.Concat(m.taken, m.given) {
		if p.Overlaps(q) {
			return true
		}
	}
	return false
}

func (m *model) allocate(want netip.Prefix) (netip.Prefix, bool) {
	if m.inPlan(want) && !m.overlapsAny(want) {
		m.given = append(m.given, want)
		return want, true
	}
	for _, pool := range m.pools {
		if pool.Addr().BitLen() != want.Addr().BitLen() || pool.Bits() > want.Bits() {
			continue
		}
		n := 1 << (want.Bits() - pool.Bits())
		for k := range n {
			a := pool.Addr().As4()
			v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
			v += uint32(k) << (32 - want.Bits())
			b := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), want.Bits())
			if !m.overlapsAny(b) {
				m.given = append(m.given, b)
				return b, true
			}
		}
	}
	return netip.Prefix{}, false
}

func (m *model) release(p netip.Prefix) {
	m.given = slices.DeleteFunc(m.given, func(q netip.Prefix) bool { return q == p })
}

// randomWant returns a CIDR a peer might declare: often inside the pools,
// sometimes on a local range, sometimes outside the pools.
func randomWant(rng *rand.Rand) netip.Prefix {
	bits := 20 + rng.IntN(7)
	var a netip.Addr
	switch rng.IntN(4) {
	case 0, 1:
		a = netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(64)), 0})
	case 2:
		a = netip.AddrFrom4([4]byte{172, 16, byte(rng.IntN(16)), 0})
	default:
		a = netip.AddrFrom4([4]byte{100, 64, byte(rng.IntN(4)), 0})
	}
	return netip.PrefixFrom(a, bits).Masked()
}

// TestRandomOperations runs 10,000 random allocations and releases against
// the allocator and the reference model, and checks after every step that
// both agree, that no allocation overlaps another or a local range, and that
// a free CIDR inside the plan was kept.
func TestRandomOperations(t *testing.T) {
	pools := cidr.MustPrefixes("10.0.0.0/18", "172.16.0.0/20")
	plan := cidr.MustPrefixes("10.0.32.0/19", "100.64.0.0/23")
	taken := cidr.MustPrefixes("10.0.0.0/22", "10.0.9.0/24", "10.0.12.0/22", "172.16.4.0/22", "100.64.1.0/24")
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			a := newPlanned(t, pools, plan, taken)
			m := &model{pools: pools, plan: plan, taken: taken}
			var given []netip.Prefix
			for step := range 10000 {
				if len(given) > 0 && rng.IntN(100) < 45 {
					k := rng.IntN(len(given))
					p := given[k]
					if err := a.Release(p); err != nil {
						t.Fatalf("step %d: Release(%s): %v", step, p, err)
					}
					m.release(p)
					given = slices.Delete(given, k, k+1)
					continue
				}
				want := randomWant(rng)
				wasFree := m.inPlan(want) && !m.overlapsAny(want)
				got, err := a.Allocate(want)
				mgot, mok := m.allocate(want)
				if (err == nil) != mok || got != mgot {
					t.Fatalf("step %d: Allocate(%s) = %v, %v; the reference gives %v, %v", step, want, got, err, mgot, mok)
				}
				if err != nil {
					if !errors.Is(err, ErrExhausted) {
						t.Fatalf("step %d: Allocate(%s): %v, want ErrExhausted", step, want, err)
					}
					continue
				}
				if wasFree != (got == want) && !(got == want && inAny(pools, got)) {
					t.Fatalf("step %d: Allocate(%s) = %s; free inside the plan: %t", step, want, got, wasFree)
				}
				if wasFree && got != want {
					t.Fatalf("step %d: Allocate(%s) = %s although it was free", step, want, got)
				}
				if got.Bits() != want.Bits() {
					t.Fatalf("step %d: Allocate(%s) = %s of another length", step, want, got)
				}
				for _, q := range slices.Concat(taken, given) {
					if got.Overlaps(q) {
						t.Fatalf("step %d: Allocate(%s) = %s overlaps %s", step, want, got, q)
					}
				}
				given = append(given, got)
			}
			if i, j, ok := cidr.FirstOverlap(given); ok {
				t.Errorf("allocations %s and %s overlap", given[i], given[j])
			}
		})
	}
}

// inAny reports whether p lies inside one of ps.
func inAny(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// TestDeterministic replays one sequence of requests on two allocators.
func TestDeterministic(t *testing.T) {
	run := func() []netip.Prefix {
		rng := rand.New(rand.NewPCG(7, 7))
		a := newAllocator(t, DefaultPools(), localRanges())
		var out, given []netip.Prefix
		for range 3000 {
			if len(given) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(given))
				if err := a.Release(given[k]); err != nil {
					t.Fatal(err)
				}
				given = slices.Delete(given, k, k+1)
				continue
			}
			got, err := a.Allocate(pfx([]string{"10.244.0.0/24", "10.70.0.0/24", "10.245.0.0/24", "192.168.0.0/20"}[rng.IntN(4)]))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, got)
			given = append(given, got)
		}
		return out
	}
	if first, second := run(), run(); !slices.Equal(first, second) {
		t.Error("the same sequence of requests gave different ranges")
	}
}

func BenchmarkAllocateRelease1000Peers(b *testing.B) {
	a, err := New(DefaultPools(), localRanges())
	if err != nil {
		b.Fatal(err)
	}
	for range 1000 {
		if _, err := a.Allocate(pfx("10.244.0.0/24")); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		got, err := a.Allocate(pfx("10.244.0.0/24"))
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Release(got); err != nil {
			b.Fatal(err)
		}
	}
}
