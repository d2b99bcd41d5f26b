package testbed

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// Ping sends one ICMP echo from ns to dst and waits a second for the reply.
func Ping(ns *netns.NS, dst netip.Addr) error {
	_, err := ns.Run("ping", "-c", "1", "-W", "1", "-n", dst.String())
	return err
}

// WaitPing pings from ns until dst answers or timeout passes, and returns
// how long it took.
func WaitPing(ctx context.Context, ns *netns.NS, dst netip.Addr, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		err := Ping(ns, dst)
		if err == nil {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("%s did not answer pings from %s within %v: %w", dst, ns.Name, timeout, err)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ObserveTCP listens on port in server, connects to dst:port from client,
// sends a line back and forth, and returns the source address the server
// saw. Both ends use dst's address family.
func ObserveTCP(server, client *netns.NS, dst netip.Addr, port int) (netip.Addr, error) {
	network := "tcp4"
	if dst.Is6() {
		network = "tcp6"
	}
	var l net.Listener
	if err := server.Do(func() error {
		var err error
		l, err = net.Listen(network, ":"+strconv.Itoa(port))
		return err
	}); err != nil {
		return netip.Addr{}, fmt.Errorf("listen in %s: %w", server.Name, err)
	}
	defer l.Close()
	seen := make(chan netip.Addr, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		seen <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		_, _ = io.Copy(c, c)
	}()
	var conn net.Conn
	if err := client.Do(func() error {
		var err error
		conn, err = net.DialTimeout(network, netip.AddrPortFrom(dst, uint16(port)).String(), 5*time.Second)
		return err
	}); err != nil {
		return netip.Addr{}, fmt.Errorf("connect from %s to %s:%d: %w", client.Name, dst, port, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	msg := []byte("peerlink\n")
	if _, err := conn.Write(msg); err != nil {
		return netip.Addr{}, fmt.Errorf("write to %s:%d: %w", dst, port, err)
	}
	echo := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, echo); err != nil {
		return netip.Addr{}, fmt.Errorf("read echo from %s:%d: %w", dst, port, err)
	}
	select {
	case a := <-seen:
		return a, nil
	case <-time.After(5 * time.Second):
		return netip.Addr{}, fmt.Errorf("server in %s saw no connection", server.Name)
	}
}
