package plan

import (
	"net/netip"
	"testing"
)

func TestOverlay(t *testing.T) {
	if got := OverlayMAC(netip.MustParseAddr("10.244.0.10")).String(); got != "02:50:0a:f4:00:0a" {
		t.Errorf("OverlayMAC(10.244.0.10) = %s", got)
	}
	// IPv6: 02:51 and the head of the SHA-256 of the address, computed
	// apart (Python's hashlib); the two differ only in their prefix.
	for addr, want := range map[string]string{
		"fd30:0:1::2":        "02:51:a2:eb:08:78",
		"fd30:0:2::2":        "02:51:b1:69:10:5a",
		"::ffff:10.244.0.10": "02:50:0a:f4:00:0a",
	} {
		if got := OverlayMAC(netip.MustParseAddr(addr)).String(); got != want {
			t.Errorf("OverlayMAC(%s) = %s, want %s", addr, got, want)
		}
	}
	if Geneve.Port() != GenevePort || VXLAN.Port() != VXLANPort {
		t.Errorf("ports: geneve %d, vxlan %d", Geneve.Port(), VXLAN.Port())
	}
}
