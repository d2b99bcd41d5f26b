package labctl

import (
	"maps"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	out := []byte(`# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 4.2e+07
peerlink_gateway_ingress_dropped_packets_total{reason="source"} 3
peerlink_gateway_refused{reason="a b"} 1
broken_sample x

`)
	want := map[string]float64{
		"process_resident_memory_bytes":                                   4.2e7,
		`peerlink_gateway_ingress_dropped_packets_total{reason="source"}`: 3,
		`peerlink_gateway_refused{reason="a b"}`:                          1,
	}
	if got := ParseMetrics(out); !maps.Equal(got, want) {
		t.Errorf("ParseMetrics = %v, want %v", got, want)
	}
}
