package ipam

import (
	"net/netip"
	"testing"

	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// FuzzLedger drives a Ledger with operations read from the input: assign
// hostile or ordinary CIDRs to a few owners, release them, and rebase onto
// allocators that reserve more or fewer addresses. After every operation no
// two held ranges overlap, none overlaps a taken range, and each has the
// length of the CIDR it was given for, is that CIDR inside the plan or a
// block of a pool, and holds no cloud service address.
func FuzzLedger(f *testing.F) {
	f.Add([]byte{0, 1, 10, 244, 0, 0, 16, 0, 2, 10, 244, 0, 0, 16, 2, 10, 244, 3, 4, 1, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 3, 169, 254, 0, 0, 16, 2, 10, 0, 0, 9})
	f.Add([]byte{0, 3, 255, 255, 255, 255, 32, 0, 3, 10, 70, 0, 0, 16, 2, 10, 70, 1, 1})
	f.Add([]byte{0, 1, 100, 100, 0, 0, 16, 0, 2, 172, 31, 0, 0, 30, 0, 3, 10, 244, 0, 0, 16})
	f.Fuzz(func(t *testing.T, ops []byte) {
		pools := cidr.MustPrefixes("10.0.0.0/14", "192.168.0.0/16")
		plan := cidr.MustPrefixes("10.240.0.0/12", "100.64.0.0/10", "172.31.0.0/16")
		local := localRanges()
		var reserved []netip.Prefix
		newAlloc := func() *Allocator {
			a, err := NewPlanned(pools, plan, append(append([]netip.Prefix(nil), local...), reserved...))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return a
		}
		l := NewLedger(newAlloc())
		next := func(n int) []byte {
			if len(ops) < n {
				return nil
			}
			b := ops[:n]
			ops = ops[n:]
			return b
		}
		for steps := 0; len(ops) > 0 && steps < 200; steps++ {
			op := next(2)
			if op == nil {
				return
			}
			owner := string('a' + rune(op[1]%4))
			switch op[0] % 4 {
			case 0: // assign one CIDR
				b := next(5)
				if b == nil {
					return
				}
				want := netip.PrefixFrom(netip.AddrFrom4([4]byte{b[0], b[1], b[2], b[3]}), int(b[4]%33)).Masked()
				_, _ = l.Assign(owner, []netip.Prefix{want})
			case 1:
				l.Release(owner)
			case 2: // reserve one more address
				b := next(4)
				if b == nil {
					return
				}
				reserved = append(reserved, netip.PrefixFrom(netip.AddrFrom4([4]byte{b[0], b[1], b[2], b[3]}), 32))
				l.Rebase(newAlloc())
			case 3: // the reservations go
				reserved = nil
				l.Rebase(newAlloc())
			}
			var held []netip.Prefix
			for o, entries := range l.owners {
				for _, e := range entries {
					if e.Want.IsValid() && e.Want.Bits() != e.Got.Bits() {
						t.Fatalf("owner %s holds %s for %s: lengths differ", o, e.Got, e.Want)
					}
					inPool := false
					for _, p := range pools {
						inPool = inPool || (p.Bits() <= e.Got.Bits() && p.Contains(e.Got.Addr()))
					}
					if !inPool && (e.Got != e.Want || !inAny(plan, e.Got)) {
						t.Fatalf("owner %s holds %s for %s: neither the CIDR itself inside the plan nor in a pool", o, e.Got, e.Want)
					}
					for _, r := range append(append(append([]netip.Prefix(nil), local...), reserved...), rangepolicy.ServiceAddresses()...) {
						if e.Got.Overlaps(r) {
							t.Fatalf("owner %s holds %s, which overlaps taken %s", o, e.Got, r)
						}
					}
					held = append(held, e.Got)
				}
			}
			if i, j, ok := cidr.FirstOverlap(held); ok {
				t.Fatalf("held ranges %s and %s overlap", held[i], held[j])
			}
		}
	})
}
