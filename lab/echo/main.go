// Command echo is the lab's test workload, small enough for an image that
// holds nothing but itself (no shell, no curl), so it is its own client too.
//
//	echo serve [--http=:8080] [--sink=:9000] [--rr=:9001]
//	echo get [--timeout=5s] URL
//	echo stream [--duration=3s] [--size=131072] HOST:PORT
//	echo transfer [--bytes=10485760] [--timeout=1m] HOST:PORT
//	echo rr [--duration=3s] [--size=64] HOST:PORT
//	echo probe [--interval=200ms] [--duration=1m] [--timeout=1s] URL
//
// serve answers HTTP requests with a JSON Reply naming its pod IP and the
// caller's address as it sees it (after any NAT on the way); it also accepts
// TCP streams it discards (sink) and fixed-size request/response exchanges
// (rr) for throughput and rate measurements. get prints, as JSON, the reply
// of one request together with the address it was sent from. stream and rr
// print, as JSON, what they measured against a serve instance. transfer
// sends a fixed number of bytes to a sink and ends when the sink has read
// them all, printing what it measured as stream does. probe sends a
// request every interval, each on a new connection and without waiting for
// the earlier ones, and prints one JSON line per request, so an outage shows
// as a gap between answers.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/peerlink/peerlink/internal/httpjson"
	"github.com/peerlink/peerlink/lab/internal/echoapi"
)

// maxReply bounds what a client reads of an echo server's reply.
const maxReply = 64 << 10

// commands are echo's subcommands by name.
var commands = map[string]func(context.Context, []string) error{
	"serve":    serve,
	"get":      get,
	"stream":   stream,
	"transfer": transfer,
	"rr":       requestResponse,
	"probe":    probe,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: echo serve|get|stream|transfer|rr|probe ...")
		os.Exit(2)
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "echo: unknown command %q (want serve, get, stream, transfer, rr or probe)\n", os.Args[1])
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	httpAddr := fs.String("http", ":8080", "address of the HTTP echo")
	sinkAddr := fs.String("sink", ":9000", "address of the TCP sink")
	rrAddr := fs.String("rr", ":9001", "address of the TCP request/response echo")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _ := os.Hostname()
	podIP := os.Getenv("POD_IP")
	if podIP == "" {
		podIP = firstAddress()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echoapi.Reply{Pod: host, PodIP: podIP, Client: r.RemoteAddr})
	})
	srv := &http.Server{Addr: *httpAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 3)
	go func() { errc <- srv.ListenAndServe() }()
	go func() { errc <- acceptLoop(*sinkAddr, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }) }()
	go func() { errc <- acceptLoop(*rrAddr, func(c net.Conn) { _, _ = io.Copy(c, c) }) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return srv.Close()
	}
}

func acceptLoop(addr string, handle func(net.Conn)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			handle(c)
		}()
	}
}

// firstAddress is the first non-loopback IPv4 address of the pod.
func firstAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return ""
}

func get(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 5*time.Second, "time limit of the request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("get: want exactly one URL")
	}
	url := fs.Arg(0)
	var from string
	dialer := &net.Dialer{}
	client := &http.Client{
		Timeout: *timeout,
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dialer.DialContext(ctx, network, addr)
				if err == nil {
					from = c.LocalAddr().String()
				}
				return c, err
			},
		},
	}
	reply, err := httpjson.Get[echoapi.Reply](ctx, client, url, maxReply)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(echoapi.Got{URL: url, From: from, Reply: reply})
}

// measure runs a measurement named name: it parses its flags, connects to
// its host:port argument, lets run use the connection until the deadline,
// and prints what it carried.
func measure(ctx context.Context, name string, args []string, size int, run func(c net.Conn, size int, deadline time.Time) (bytes, exchanges int64, err error)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	duration := fs.Duration("duration", 3*time.Second, "how long to measure")
	sz := fs.Int("size", size, "bytes per write (stream) or per message (rr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%s: want exactly one host:port", name)
	}
	if *sz <= 0 {
		return fmt.Errorf("%s: --size must be positive", name)
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", fs.Arg(0))
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	bytes, n, err := run(c, *sz, start.Add(*duration))
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	return json.NewEncoder(os.Stdout).Encode(echoapi.Measured{
		Seconds: secs, Bytes: bytes, BitsPerSecond: float64(bytes) * 8 / secs,
		Exchanges: n, PerSecond: float64(n) / secs,
	})
}

// stream sends as much as it can to a sink for the duration.
func stream(ctx context.Context, args []string) error {
	return measure(ctx, "stream", args, 128<<10, func(c net.Conn, size int, deadline time.Time) (int64, int64, error) {
		buf := make([]byte, size)
		_ = c.SetWriteDeadline(deadline)
		var sent int64
		for time.Now().Before(deadline) && ctx.Err() == nil {
			n, err := c.Write(buf)
			sent += int64(n)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				return 0, 0, err
			}
		}
		return sent, 0, nil
	})
}

// transfer sends --bytes to a sink, then closes its side of the connection
// and waits for the sink to close its own, which it does once it has read
// everything: the transfer is complete only when every byte arrived.
func transfer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("transfer", flag.ContinueOnError)
	total := fs.Int64("bytes", 10<<20, "bytes to send")
	timeout := fs.Duration("timeout", time.Minute, "time limit of the whole transfer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("transfer: want exactly one host:port")
	}
	if *total <= 0 {
		return errors.New("transfer: --bytes must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", fs.Arg(0))
	if err != nil {
		return err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	start := time.Now()
	sent, err := io.CopyN(c, zeros{}, *total)
	if err != nil {
		return fmt.Errorf("transfer: %d of %d bytes sent: %w", sent, *total, err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, c); err != nil {
		return fmt.Errorf("transfer: %d bytes sent, waiting for the sink to read them: %w", sent, err)
	}
	secs := time.Since(start).Seconds()
	return json.NewEncoder(os.Stdout).Encode(echoapi.Measured{Seconds: secs, Bytes: sent, BitsPerSecond: float64(sent) * 8 / secs})
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// requestResponse sends one message, waits for it to come back, and repeats
// for the duration: the rate measures round trips, not bandwidth.
func requestResponse(ctx context.Context, args []string) error {
	return measure(ctx, "rr", args, 64, func(c net.Conn, size int, deadline time.Time) (int64, int64, error) {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		msg := make([]byte, size)
		back := make([]byte, size)
		_ = c.SetDeadline(deadline.Add(5 * time.Second))
		var n int64
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if _, err := c.Write(msg); err != nil {
				return 0, 0, err
			}
			if _, err := io.ReadFull(c, back); err != nil {
				return 0, 0, err
			}
			n++
		}
		return n * int64(2*size), n, nil
	})
}

func probe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	interval := fs.Duration("interval", 200*time.Millisecond, "time between requests")
	duration := fs.Duration("duration", time.Minute, "how long to probe")
	timeout := fs.Duration("timeout", time.Second, "time limit of one request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("probe: want exactly one URL")
	}
	url := fs.Arg(0)
	// A new connection per request: a connection kept across an outage
	// would measure TCP's retransmission backoff, not the path.
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	// A request goes out on every tick, whether or not the earlier ones
	// were answered: one lost in an outage does not hold back the next, so
	// the gaps between answers measure the outage to within one interval.
	// Lines are printed as requests end, not always in the order sent.
	var (
		mu   sync.Mutex
		werr error
		wg   sync.WaitGroup
	)
	enc := json.NewEncoder(os.Stdout)
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	end := time.Now().Add(*duration)
	for time.Now().Before(end) && ctx.Err() == nil {
		wg.Add(1)
		go func(line echoapi.Probe) {
			defer wg.Done()
			sent := time.Now()
			reply, err := httpjson.Get[echoapi.Reply](ctx, client, url, maxReply)
			line.Millis = time.Since(sent).Milliseconds()
			if err != nil {
				line.Error = err.Error()
			} else {
				line.OK, line.Reply = true, &reply
			}
			mu.Lock()
			defer mu.Unlock()
			if err := enc.Encode(line); err != nil && werr == nil {
				werr = err
			}
		}(echoapi.Probe{UnixMilli: time.Now().UnixMilli()})
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	wg.Wait()
	return werr
}
