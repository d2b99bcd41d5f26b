package plan

import (
	"net/netip"
	"testing"
)

func TestOverlay(t *testing.T) {
	if got := OverlayMAC(netip.MustParseAddr("10.244.0.10")).String(); got != "02:50:0a:f4:00:0a" {
		t.Errorf("OverlayMAC(10.244.0.10) = %s", got)
	}
	if Geneve.Port() != GenevePort || VXLAN.Port() != VXLANPort {
		t.Errorf("ports: geneve %d, vxlan %d", Geneve.Port(), VXLAN.Port())
	}
}
