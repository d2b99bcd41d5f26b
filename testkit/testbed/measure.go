package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// Run is one iperf3 measurement.
type Run struct {
	// BitsPerSecond is the throughput the receiver saw.
	BitsPerSecond float64
	// Bytes is what the receiver got in the measured part of the run.
	Bytes float64
	// Busy is the CPU time the whole machine spent on anything but idling
	// over the measured part (all cores, whatever ran): what carrying the
	// bytes cost, with the machine's background load alike for every path.
	Busy time.Duration
}

// CPUPerGB is the machine's busy CPU seconds per gigabyte carried.
func (r Run) CPUPerGB() float64 { return r.Busy.Seconds() / (r.Bytes / 1e9) }

// Iperf measures TCP throughput with iperf3, one stream for d, from client
// to dst, where an iperf3 server in server listens (dst may be translated on
// the way), after a first second left out.
func Iperf(ctx context.Context, server, client *netns.NS, dst netip.Addr, d time.Duration) (Run, error) {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	srv := server.Command(ctx, "iperf3", "--server", "--one-off")
	if err := srv.Start(); err != nil {
		return Run{}, fmt.Errorf("start iperf3 server in %s: %w", server.Name, err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	var lastErr error
	// The server takes a moment to listen: a refused connection is tried
	// again.
	for attempt := 0; attempt < 50; attempt++ {
		// The first second, TCP's slow start, is left out of the bytes, and
		// so of the CPU time.
		cmd := client.Command(ctx, "iperf3", "--client", dst.String(), "--json", "--omit", "1",
			"--time", strconv.Itoa(int(d.Seconds())))
		type sample struct {
			t   CPUTimes
			err error
		}
		start := make(chan sample, 1)
		timer := time.AfterFunc(time.Second, func() {
			t, err := ReadCPUTimes()
			start <- sample{t, err}
		})
		out, err := cmd.Output()
		var result struct {
			End struct {
				SumReceived struct {
					BitsPerSecond float64 `json:"bits_per_second"`
					Bytes         float64 `json:"bytes"`
				} `json:"sum_received"`
			} `json:"end"`
			Error string `json:"error"`
		}
		switch jerr := json.Unmarshal(out, &result); {
		case jerr != nil:
			lastErr = fmt.Errorf("iperf3 from %s to %s: %v, output %q", client.Name, dst, errors.Join(err, jerr), out)
		case result.Error != "":
			lastErr = fmt.Errorf("iperf3 from %s to %s: %s", client.Name, dst, result.Error)
		default:
			end, err := ReadCPUTimes()
			begin := <-start
			if err := errors.Join(err, begin.err); err != nil {
				return Run{}, err
			}
			r := result.End.SumReceived
			return Run{BitsPerSecond: r.BitsPerSecond, Bytes: r.Bytes, Busy: end.Busy - begin.t.Busy}, nil
		}
		timer.Stop()
		select {
		case <-ctx.Done():
			return Run{}, errors.Join(lastErr, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return Run{}, lastErr
}

// CPUTimes are the machine's CPU time counters, all cores summed.
type CPUTimes struct {
	// Busy is time spent on anything but idling or waiting for I/O.
	Busy time.Duration
	// Idle is time spent idling or waiting for I/O.
	Idle time.Duration
	// Stolen is time the hypervisor gave the virtual CPUs to others.
	Stolen time.Duration
}

// All is the sum of the counters: the time of every core.
func (t CPUTimes) All() time.Duration { return t.Busy + t.Idle + t.Stolen }

// ReadCPUTimes reads the first line of /proc/stat.
func ReadCPUTimes() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks [8]int64
	for i := range ticks {
		if ticks[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return CPUTimes{}, fmt.Errorf("/proc/stat: field %d of %q: %w", i+1, line, err)
		}
	}
	// The counters are in USER_HZ, 100 a second on every Linux ABI.
	tick := func(n int64) time.Duration { return time.Duration(n) * 10 * time.Millisecond }
	return CPUTimes{
		Busy:   tick(ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]),
		Idle:   tick(ticks[3] + ticks[4]),
		Stolen: tick(ticks[7]),
	}, nil
}
