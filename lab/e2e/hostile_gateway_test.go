package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/peerlink/peerlink/dataplane"
)

// hostileGateway is the gateway pod of a cluster, seen by an attacker who
// controls it: its network namespace and its WireGuard device.
type hostileGateway struct {
	t *testing.T
	// pid is a process in the gateway pod.
	pid int
	// podIP is the pod's own address, in its cluster's pod range: packets
	// from it pass the peer's WireGuard as that cluster's pods do.
	podIP string
}

// run runs a host program in the gateway pod's network namespace.
func (g *hostileGateway) run(args ...string) ([]byte, error) {
	return exec.Command("nsenter", append([]string{"-t", strconv.Itoa(g.pid), "-n", "--"}, args...)...).CombinedOutput()
}

// connect tries a TCP connection to addr through the tunnel, as the owner
// of the gateway pod can: a route to addr into the tunnel from the pod's
// own address, and the peer's WireGuard allowed IPs widened to everything
// (the agent sets them back at its next sync, so they are widened again
// before each try). It returns nil only if a connection was made.
func (g *hostileGateway) connect(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if out, err := g.run("ip", "route", "replace", host+"/32", "dev", dataplane.TunnelLink, "src", g.podIP); err != nil {
		return fmt.Errorf("route %s into the tunnel: %v: %s", host, err, out)
	}
	defer g.run("ip", "route", "del", host+"/32", "dev", dataplane.TunnelLink)
	// The new route wakes the agent, which then writes its WireGuard
	// configuration again: widen it after that.
	time.Sleep(500 * time.Millisecond)
	var last error
	for range 3 {
		if err := g.widenAllowedIPs(); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		out, err := exec.CommandContext(cctx, "nsenter", "-t", strconv.Itoa(g.pid), "-n", "--",
			"bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port)).CombinedOutput()
		cancel()
		if err == nil {
			return nil
		}
		last = fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return last
}

// widenAllowedIPs lets the gateway's WireGuard send anything to its peer,
// through the device's UAPI socket (the userspace WireGuard's, seen
// through the pod's root).
func (g *hostileGateway) widenAllowedIPs() error {
	sock := fmt.Sprintf("/proc/%d/root/var/run/wireguard/%s.sock", g.pid, dataplane.TunnelLink)
	uapi := func(req string) (string, error) {
		c, err := net.DialTimeout("unix", sock, 2*time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte(req)); err != nil {
			return "", err
		}
		var out strings.Builder
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			if sc.Text() == "" {
				break
			}
			out.WriteString(sc.Text() + "\n")
		}
		return out.String(), sc.Err()
	}
	state, err := uapi("get=1\n\n")
	if err != nil {
		return fmt.Errorf("read the WireGuard device of the gateway: %w", err)
	}
	var peer string
	for _, line := range strings.Split(state, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k == "public_key" {
			peer = v
		}
	}
	if peer == "" {
		return fmt.Errorf("the WireGuard device of the gateway has no peer:\n%s", state)
	}
	got, err := uapi("set=1\npublic_key=" + peer + "\nupdate_only=true\nreplace_allowed_ips=true\nallowed_ip=0.0.0.0/0\n\n")
	if err != nil || !strings.Contains(got, "errno=0") {
		return fmt.Errorf("widen the allowed IPs of the gateway's peer: %v %s", err, got)
	}
	return nil
}
