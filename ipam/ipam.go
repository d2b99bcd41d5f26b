package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// Sentinel errors of the Allocator, to test with errors.Is.
var (
	// ErrExhausted reports that no pool has a free block of the asked length.
	ErrExhausted = errors.New("no free block of that length in the pools")
	// ErrOverlap reports a range that overlaps one already taken.
	ErrOverlap = errors.New("overlaps a taken range")
	// ErrNotAllocated reports the release of a range the Allocator did not hand out.
	ErrNotAllocated = errors.New("not allocated")
	// ErrInvalid reports a prefix that is not a valid network (host bits set,
	// or the zero value).
	ErrInvalid = errors.New("not a valid network")
	// ErrOutside reports a range claimed outside the pools and the plan.
	ErrOutside = errors.New("outside the pools and the plan")
)

// ipv4Mapped are the IPv6 addresses that stand for IPv4 ones.
var ipv4Mapped = netip.MustParsePrefix("::ffff:0:0/96")

// within reports whether p lies inside one of ps.
func within(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q.Addr().BitLen() == p.Addr().BitLen() && q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// DefaultPools returns the ranges remapped peer CIDRs are taken from when none
// are configured, in search order: the private IPv4 ranges of RFC 1918, and
// for IPv6 the locally assigned half of the unique local addresses of RFC
// 4193, fd00::/8 (fc00::/8 is set aside for a registry that may assign it).
func DefaultPools() []netip.Prefix {
	return cidr.MustPrefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fd00::/8")
}

// PoolsOrDefault returns pools followed by the DefaultPools of each family
// pools hold none of: a range is remapped only into a pool of its own
// family, so an installer that lists IPv4 pools alone still has IPv6
// ranges remapped into fd00::/8, and the reverse.
func PoolsOrDefault(pools []netip.Prefix) []netip.Prefix {
	out := slices.Clone(pools)
	for _, d := range DefaultPools() {
		if !slices.ContainsFunc(pools, func(p netip.Prefix) bool { return p.Addr().Is4() == d.Addr().Is4() }) {
			out = append(out, d)
		}
	}
	return out
}

// Allocator hands out ranges for peer CIDRs. The zero value is not usable;
// call New. It is not safe for concurrent use.
type Allocator struct {
	pools []netip.Prefix
	// plan is the address plan declared for peers: only inside it is a
	// peer's range kept as it is.
	plan []netip.Prefix
	// used holds every taken address, local ranges and allocations alike,
	// as sorted, disjoint spans with touching spans merged, so that a run of
	// remapped blocks is one span and the search steps over it at once.
	used []span
	// given holds the allocations, which alone may be released.
	given map[netip.Prefix]struct{}
}

// New returns an Allocator with an empty plan: every range it hands out is a
// block of the pools. See NewPlanned.
func New(pools, taken []netip.Prefix) (*Allocator, error) {
	return NewPlanned(pools, nil, taken)
}

// NewPlanned returns an Allocator that keeps a peer's range as it is only
// inside plan (the address plan this cluster's admin declared for peers),
// searches pools in order for every other range, and never hands out an
// address of taken (this cluster's own ranges) nor a well-known cloud
// service address (rangepolicy.ServiceAddresses). Pools must be valid,
// masked and disjoint; plan and taken ranges must be valid and masked and
// may overlap.
func NewPlanned(pools, plan, taken []netip.Prefix) (*Allocator, error) {
	for i, p := range plan {
		if err := checkNetwork(p); err != nil {
			return nil, fmt.Errorf("plan range %d (%s): %w", i, p, err)
		}
	}
	for i, p := range pools {
		if err := checkNetwork(p); err != nil {
			return nil, fmt.Errorf("pool %d (%s): %w", i, p, err)
		}
		// Ranges of both families share the allocator's 128-bit space,
		// IPv4 in its IPv4-mapped form: an IPv6 pool there would hand out
		// IPv4 addresses under another name.
		if p.Addr().Is6() && p.Overlaps(ipv4Mapped) {
			return nil, fmt.Errorf("pool %d (%s): overlaps %s, the IPv4-mapped IPv6 addresses", i, p, ipv4Mapped)
		}
	}
	if i, j, ok := cidr.FirstOverlap(pools); ok {
		return nil, fmt.Errorf("pool %d (%s) overlaps pool %d (%s)", i, pools[i], j, pools[j])
	}
	a := &Allocator{pools: slices.Clone(pools), plan: slices.Clone(plan), given: make(map[netip.Prefix]struct{})}
	for i, p := range taken {
		if err := checkNetwork(p); err != nil {
			return nil, fmt.Errorf("taken range %d (%s): %w", i, p, err)
		}
		a.takeRange(p)
	}
	for _, p := range rangepolicy.ServiceAddresses() {
		a.take(spanOf(p))
	}
	return a, nil
}

func checkNetwork(p netip.Prefix) error {
	if !p.IsValid() || p != p.Masked() {
		return ErrInvalid
	}
	return nil
}

// Allocate takes a range for a peer's CIDR want: want itself when it lies
// inside the plan and overlaps nothing taken, otherwise the first free block
// of the same length in the pools of its family (aligned to its length):
// an IPv4 and an IPv6 range of one peer are placed independently. The
// ErrExhausted error names the pools of the family it searched.
func (a *Allocator) Allocate(want netip.Prefix) (netip.Prefix, error) {
	if err := checkNetwork(want); err != nil {
		return netip.Prefix{}, fmt.Errorf("allocate for %s: %w", want, err)
	}
	if s := spanOf(want); within(a.plan, want) && a.free(s) {
		a.take(s)
		a.given[want] = struct{}{}
		return want, nil
	}
	var searched []string
	for _, pool := range a.pools {
		if pool.Addr().BitLen() != want.Addr().BitLen() {
			continue
		}
		searched = append(searched, pool.String())
		if pool.Bits() > want.Bits() {
			continue
		}
		if got, ok := a.firstFree(pool, want.Bits()); ok {
			a.take(spanOf(got))
			a.given[got] = struct{}{}
			return got, nil
		}
	}
	family := "IPv4"
	if want.Addr().Is6() {
		family = "IPv6"
	}
	if len(searched) == 0 {
		return netip.Prefix{}, fmt.Errorf("allocate for %s: %w (no %s pool)", want, ErrExhausted, family)
	}
	return netip.Prefix{}, fmt.Errorf("allocate for %s: %w (%s pools: %s)", want, ErrExhausted, family, strings.Join(searched, ","))
}

// Claim takes exactly p as an allocation, as Allocate once did: it rebuilds the
// Allocator from allocations recorded elsewhere. It fails with ErrOverlap when
// p overlaps a taken range or an earlier allocation, and with ErrOutside when
// p lies neither in a pool nor in the plan, where Allocate never puts a
// range (one kept as it is before the plan changed, say).
func (a *Allocator) Claim(p netip.Prefix) error {
	if err := checkNetwork(p); err != nil {
		return fmt.Errorf("claim %s: %w", p, err)
	}
	if !within(a.pools, p) && !within(a.plan, p) {
		return fmt.Errorf("claim %s: %w", p, ErrOutside)
	}
	s := spanOf(p)
	if !a.free(s) {
		return fmt.Errorf("claim %s: %w", p, ErrOverlap)
	}
	a.take(s)
	a.given[p] = struct{}{}
	return nil
}

// Release gives back a range that Allocate or Claim handed out, so that a
// later Allocate may hand it out again.
func (a *Allocator) Release(p netip.Prefix) error {
	if _, ok := a.given[p]; !ok {
		return fmt.Errorf("release %s: %w", p, ErrNotAllocated)
	}
	delete(a.given, p)
	s := spanOf(p)
	// The span holding p starts at or before p: the last one that does.
	i := sort.Search(len(a.used), func(k int) bool { return a.used[k].first.cmp(s.first) > 0 }) - 1
	u := a.used[i]
	var rest []span
	if u.first.cmp(s.first) < 0 {
		rest = append(rest, span{u.first, s.first.sub(u128{lo: 1})})
	}
	if s.last.cmp(u.last) < 0 {
		next, _ := s.last.add(u128{lo: 1})
		rest = append(rest, span{next, u.last})
	}
	a.used = slices.Replace(a.used, i, i+1, rest...)
	return nil
}

// takeRange marks the taken range p as used. An IPv6 range that holds the
// IPv4-mapped addresses (::/64 around a node's odd address, say) is taken
// without them: the allocator keeps IPv4 addresses there, and an IPv6
// range holds no IPv4 one.
func (a *Allocator) takeRange(p netip.Prefix) {
	s := spanOf(p)
	if !p.Addr().Is6() || p.Bits() >= ipv4Mapped.Bits() || !p.Contains(ipv4Mapped.Addr()) {
		a.take(s)
		return
	}
	m := spanOf(ipv4Mapped)
	if s.first.cmp(m.first) < 0 {
		a.take(span{s.first, m.first.sub(u128{lo: 1})})
	}
	if m.last.cmp(s.last) < 0 {
		next, _ := m.last.add(u128{lo: 1})
		a.take(span{next, s.last})
	}
}

// firstUsedFrom returns the index of the first used span that ends at or after x.
func (a *Allocator) firstUsedFrom(x u128) int {
	return sort.Search(len(a.used), func(k int) bool { return a.used[k].last.cmp(x) >= 0 })
}

// free reports whether no address of s is taken.
func (a *Allocator) free(s span) bool {
	i := a.firstUsedFrom(s.first)
	return i == len(a.used) || a.used[i].first.cmp(s.last) > 0
}

// take marks the free span s as used, merging it with touching neighbours.
func (a *Allocator) take(s span) {
	i := a.firstUsedFrom(s.first)
	// Taken local ranges may overlap each other (and so s may overlap used
	// spans); swallow every span that overlaps or touches s.
	if i > 0 {
		if next, carry := a.used[i-1].last.add(u128{lo: 1}); !carry && next == s.first {
			i--
		}
	}
	j := i
	for j < len(a.used) {
		u := a.used[j]
		if next, carry := s.last.add(u128{lo: 1}); u.first.cmp(s.last) > 0 && (carry || u.first != next) {
			break
		}
		if u.first.cmp(s.first) < 0 {
			s.first = u.first
		}
		if u.last.cmp(s.last) > 0 {
			s.last = u.last
		}
		j++
	}
	a.used = slices.Replace(a.used, i, j, s)
}

// firstFree returns the lowest free block of length bits inside pool.
func (a *Allocator) firstFree(pool netip.Prefix, bits int) (netip.Prefix, bool) {
	ps := spanOf(pool)
	size := pow2(128 - (bits + 128 - pool.Addr().BitLen()))
	mask := size.sub(u128{lo: 1})
	// The pool's start is aligned to the pool's size, hence to the block's.
	cand := ps.first
	i := a.firstUsedFrom(cand)
	for {
		last, _ := cand.add(mask)
		if last.cmp(ps.last) > 0 {
			return netip.Prefix{}, false
		}
		if i == len(a.used) || a.used[i].first.cmp(last) > 0 {
			return netip.PrefixFrom(addrOf(cand, pool.Addr().Is4()), bits), true
		}
		// The block overlaps used[i]: the next candidate is the first
		// aligned block after it.
		next, carry := a.used[i].last.add(size)
		if carry {
			return netip.Prefix{}, false
		}
		cand = next.and(mask.not())
		i = a.firstUsedFrom(cand)
	}
}

// addrOf converts a 128-bit number back to an address of the given family.
func addrOf(u u128, is4 bool) netip.Addr {
	var b [16]byte
	for i := range 8 {
		b[i] = byte(u.hi >> (56 - 8*i))
		b[i+8] = byte(u.lo >> (56 - 8*i))
	}
	a := netip.AddrFrom16(b)
	if is4 {
		return a.Unmap()
	}
	return a
}
