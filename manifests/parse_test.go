package manifests

import (
	"slices"
	"strings"
	"testing"
)

// TestParseLists reads repeated values that are each a comma-separated
// list, as the CLI's flags take them: empty items and spaces are dropped,
// and the first bad item fails the whole list, named.
func TestParseLists(t *testing.T) {
	addrs, err := ParseAddressList("192.0.2.10, gw.example.org", "", " ,198.51.100.7")
	if want := []string{"192.0.2.10", "gw.example.org", "198.51.100.7"}; err != nil || !slices.Equal(addrs, want) {
		t.Errorf("ParseAddressList = %q, %v; want %q", addrs, err, want)
	}
	for _, bad := range []string{"127.0.0.1", "0.0.0.0", "999.1.1.1", "a b"} {
		if _, err := ParseAddressList("192.0.2.10", bad); err == nil || !strings.Contains(err.Error(), strings.TrimSpace(bad)) {
			t.Errorf("ParseAddressList(%q) = %v, want an error naming it", bad, err)
		}
	}
	cidrs, err := ParseCIDRList("10.244.0.0/16, 10.70.0.0/16", "")
	if err != nil || len(cidrs) != 2 || cidrs[1].String() != "10.70.0.0/16" {
		t.Errorf("ParseCIDRList = %v, %v", cidrs, err)
	}
	if _, err := ParseCIDRList("10.244.0.0/16,10.70.0.1/16"); err == nil {
		t.Error("ParseCIDRList accepted a CIDR with host bits")
	}
}
