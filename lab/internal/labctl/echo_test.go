package labctl

import (
	"testing"
	"time"

	"github.com/peerlink/peerlink/lab/internal/echoapi"
)

func TestLongestGap(t *testing.T) {
	from := time.UnixMilli(10_000)
	until := from.Add(10 * time.Second)
	at := func(ms int64, ok bool) echoapi.Probe { return echoapi.Probe{UnixMilli: 10_000 + ms, OK: ok, Millis: 3} }
	slow := func(ms, took int64) echoapi.Probe {
		return echoapi.Probe{UnixMilli: 10_000 + ms, OK: true, Millis: took}
	}
	for _, c := range []struct {
		name   string
		probes []echoapi.Probe
		want   time.Duration
	}{
		{"no answer at all", nil, 10 * time.Second},
		{"answers all along", []echoapi.Probe{at(0, true), at(2000, true), at(4000, true), at(6000, true), at(8000, true), at(9900, true)}, 2 * time.Second},
		{"an outage in the middle", []echoapi.Probe{at(500, true), at(1000, true), at(1500, false), at(4000, false), at(4700, true), at(9500, true)}, 4800 * time.Millisecond},
		{"answers before the window do not count", []echoapi.Probe{at(-5000, true), at(3000, true), at(9800, true)}, 6800 * time.Millisecond},
		{"answers stop before the end", []echoapi.Probe{at(100, true), at(200, true), at(3000, false)}, 9800 * time.Millisecond},
		{"answers after the window do not count", []echoapi.Probe{at(1000, true), at(12000, true)}, 9 * time.Second},
		{"a late answer counts as none", []echoapi.Probe{at(500, true), slow(1000, 1200), at(2000, true), slow(2500, 1000), at(9000, true)}, 6500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := LongestGap(c.probes, from, until); got != c.want {
				t.Errorf("LongestGap = %v, want %v", got, c.want)
			}
		})
	}
}
