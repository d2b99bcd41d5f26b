package netns

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A Pair is a namespace the host reaches over its veth and that routes
// through the host; it is made once, and removed as often as asked.
func TestPair(t *testing.T) {
	RequirePrivileged(t)
	probe := New(t, "pair")
	p := Pair{
		// The name of a namespace New made is free again once it is gone.
		Namespace: probe.Name + "x",
		HostIf:    "pltest" + probe.Name[len(probe.Name)-4:],
		HostAddr:  netip.MustParsePrefix("198.18.250.1/30"),
		NodeAddr:  netip.MustParsePrefix("198.18.250.2/30"),
		HostAddr6: netip.MustParsePrefix("fd30:ffff:250::1/64"),
		NodeAddr6: netip.MustParsePrefix("fd30:ffff:250::2/64"),
	}
	t.Cleanup(func() { _ = p.Delete() })
	if err := p.Create(); err != nil {
		t.Fatal(err)
	}
	if !Exists(p.Namespace) || !p.HostIfExists() {
		t.Fatalf("after Create: namespace %v, host interface %v", Exists(p.Namespace), p.HostIfExists())
	}
	if err := p.Create(); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second Create: %v, want already exists", err)
	}
	for _, a := range []netip.Addr{p.NodeAddr.Addr(), p.NodeAddr6.Addr()} {
		if out, err := exec.Command("ping", "-c", "1", "-W", "2", a.String()).CombinedOutput(); err != nil {
			t.Errorf("the host does not reach the namespace at %s: %v\n%s", a, err, out)
		}
	}
	ns, err := Open(p.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if out := ns.MustRun(t, "ip", "route", "show", "default"); !strings.Contains(out, "via "+p.HostAddr.Addr().String()) {
		t.Errorf("default route in the namespace: %q", out)
	}
	if out := ns.MustRun(t, "ip", "-6", "route", "show", "default"); !strings.Contains(out, "via "+p.HostAddr6.Addr().String()) {
		t.Errorf("IPv6 default route in the namespace: %q", out)
	}
	if out := ns.MustRun(t, "ip", "-o", "link", "show", "lo"); !strings.Contains(out, "UP") {
		t.Errorf("lo is not up: %q", out)
	}
	if err := ns.Close(); err != nil {
		t.Error(err)
	}
	for i := range 2 {
		if err := p.Delete(); err != nil {
			t.Fatalf("Delete %d: %v", i+1, err)
		}
	}
	if Exists(p.Namespace) || p.HostIfExists() {
		t.Errorf("after Delete: namespace %v, host interface %v", Exists(p.Namespace), p.HostIfExists())
	}
}

// Joined namespaces reach each other over their veth, at the addresses
// given; an end without one has none.
func TestJoined(t *testing.T) {
	a, b := Joined(t, End{Prefix: "ja", Link: "left", Addr: "198.18.251.1/30"}, End{Prefix: "jb", Link: "right"})
	if out := b.MustRun(t, "ip", "-o", "-4", "addr", "show", "dev", "right"); out != "" {
		t.Errorf("the end without an address has one: %q", out)
	}
	b.MustRun(t, "ip", "addr", "add", "198.18.251.2/30", "dev", "right")
	a.MustRun(t, "ping", "-c", "1", "-W", "2", "198.18.251.2")
}

// Do runs code in the namespace: a sysctl it writes is the namespace's, as
// a program run there reads it, and not the host's.
func TestDoSysctl(t *testing.T) {
	RequirePrivileged(t)
	ns := New(t, "sysctl")
	const key = "net/ipv4/ip_forward"
	host, err := ReadSysctl(key)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"0": "1", "1": "0"}[host]
	if err := ns.Do(func() error { return WriteSysctl(key, want) }); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(ns.MustRun(t, "sysctl", "-n", "net.ipv4.ip_forward")); got != want {
		t.Errorf("ip_forward in the namespace is %s, want %s", got, want)
	}
	if got, err := ReadSysctl(key); err != nil || got != host {
		t.Errorf("ip_forward of the host is %s (%v), want it left at %s", got, err, host)
	}
}

// Enter runs a program in the namespace with the host's mounts; AsPod gives
// it mounts of its own, with a /run/wireguard of its own.
func TestEnterAndAsPod(t *testing.T) {
	RequirePrivileged(t)
	ns := New(t, "exec")
	netIno, err := Inode(Path(ns.Name))
	if err != nil {
		t.Fatal(err)
	}
	hostMnt, err := Inode("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	// The shell prints the inodes of its own namespaces.
	const show = `stat -L -c %i /proc/$$/ns/net /proc/$$/ns/mnt`
	marker := fmt.Sprintf("netns-test-%d", os.Getpid())
	for _, c := range []struct {
		name     string
		argv     []string
		hostMnts bool
	}{
		{"Enter", Enter(ns.Name, "sh", "-c", show), true},
		{"AsPod", AsPod(ns.Name, "sh", "-c", "touch /run/wireguard/"+marker+" && "+show), false},
	} {
		out, err := exec.Command(c.argv[0], c.argv[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		f := strings.Fields(string(out))
		if len(f) < 2 {
			t.Fatalf("%s: output %q", c.name, out)
		}
		if f[0] != fmt.Sprint(netIno) {
			t.Errorf("%s: network namespace %s, want %d", c.name, f[0], netIno)
		}
		if sameMnt := f[1] == fmt.Sprint(hostMnt); sameMnt != c.hostMnts {
			t.Errorf("%s: in the host's mount namespace: %v, want %v", c.name, sameMnt, c.hostMnts)
		}
	}
	if _, err := os.Stat("/run/wireguard/" + marker); err == nil {
		os.Remove("/run/wireguard/" + marker)
		t.Errorf("AsPod wrote into the host's /run/wireguard")
	}
}
