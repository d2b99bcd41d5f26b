package ipam

import (
	"errors"
	"net/netip"
	"testing"
)

func TestAllocateAddress(t *testing.T) {
	a := netip.MustParseAddr
	ext := netip.MustParsePrefix("10.70.0.0/16")
	for _, tc := range []struct {
		name     string
		external netip.Prefix
		taken    []string
		keep     string
		want     string
		err      error
	}{
		{name: "first free skips the unknown source", external: ext, want: "10.70.0.1"},
		{name: "taken addresses are skipped", external: ext, taken: []string{"10.70.0.1", "10.70.0.2"}, want: "10.70.0.3"},
		{name: "a free address already given is kept", external: ext, taken: []string{"10.70.0.1"}, keep: "10.70.3.4", want: "10.70.3.4"},
		{name: "a kept address another holds is replaced", external: ext, taken: []string{"10.70.3.4"}, keep: "10.70.3.4", want: "10.70.0.1"},
		{name: "a kept unknown source is replaced", external: ext, keep: "10.70.0.0", want: "10.70.0.1"},
		{name: "a kept address outside the range is replaced", external: ext, keep: "10.71.0.9", want: "10.70.0.1"},
		{name: "never the broadcast address", external: netip.MustParsePrefix("10.70.0.0/30"), taken: []string{"10.70.0.1", "10.70.0.2"}, err: ErrNoAddress},
		{name: "a /31 gives its second address", external: netip.MustParsePrefix("10.70.0.0/31"), want: "10.70.0.1"},
		{name: "a /32 gives nothing", external: netip.MustParsePrefix("10.70.0.0/32"), err: ErrNoAddress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := map[netip.Addr]bool{}
			for _, s := range tc.taken {
				taken[a(s)] = true
			}
			var keep netip.Addr
			if tc.keep != "" {
				keep = a(tc.keep)
			}
			got, err := AllocateAddress(tc.external, taken, keep)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("AllocateAddress = %v, %v; want error %v", got, err, tc.err)
				}
				return
			}
			if err != nil || got != a(tc.want) {
				t.Fatalf("AllocateAddress = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestAllocateAddressRefusesBadRange(t *testing.T) {
	for _, p := range []string{"10.70.0.1/16", "fd00::/64"} {
		if _, err := AllocateAddress(netip.MustParsePrefix(p), nil, netip.Addr{}); err == nil {
			t.Errorf("AllocateAddress(%s): no error", p)
		}
	}
}
