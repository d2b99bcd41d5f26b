package wireguard

import (
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

func mustKey(t *testing.T) plan.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return plan.Key(k)
}

func TestDiff(t *testing.T) {
	priv, peer, other := mustKey(t), mustKey(t).PublicKey(), mustKey(t).PublicKey()
	want := plan.WireGuard{
		PrivateKey: priv,
		ListenPort: 51840,
		Peer: plan.WireGuardPeer{
			PublicKey:           peer,
			AllowedIPs:          []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("169.254.18.2/32")},
			PersistentKeepalive: 25 * time.Second,
		},
	}
	roamed := &net.UDPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40000}
	inSync := &wgtypes.Device{
		PrivateKey: wgtypes.Key(priv),
		ListenPort: 51840,
		Peers: []wgtypes.Peer{{
			PublicKey:                   wgtypes.Key(peer),
			Endpoint:                    roamed,
			PersistentKeepaliveInterval: 25 * time.Second,
			AllowedIPs: []net.IPNet{
				{IP: net.IPv4(169, 254, 18, 2).To4(), Mask: net.CIDRMask(32, 32)},
				{IP: net.IPv4(10, 244, 0, 0).To4(), Mask: net.CIDRMask(16, 32)},
			},
		}},
	}

	if cfg, changed := Diff(inSync, want); changed {
		t.Errorf("Diff of a device in sync = %+v, want no change (a learned endpoint is kept)", cfg)
	}

	empty := &wgtypes.Device{}
	cfg, changed := Diff(empty, want)
	if !changed || cfg.PrivateKey == nil || *cfg.PrivateKey != wgtypes.Key(priv) || cfg.ListenPort == nil || *cfg.ListenPort != 51840 {
		t.Fatalf("Diff of an empty device = %+v, %v; want key and port written", cfg, changed)
	}
	if len(cfg.Peers) != 1 || cfg.Peers[0].Endpoint != nil || !cfg.Peers[0].ReplaceAllowedIPs || len(cfg.Peers[0].AllowedIPs) != 2 ||
		cfg.Peers[0].PersistentKeepaliveInterval == nil || *cfg.Peers[0].PersistentKeepaliveInterval != 25*time.Second {
		t.Errorf("Diff of an empty device wrote peer %+v", cfg.Peers)
	}

	client := want
	client.ListenPort = 0
	client.Peer.Endpoint = netip.MustParseAddrPort("192.0.2.1:51840")
	cfg, changed = Diff(inSync, client)
	if !changed || len(cfg.Peers) != 1 || cfg.Peers[0].Endpoint.String() != "192.0.2.1:51840" || cfg.ListenPort != nil {
		t.Errorf("Diff with a new endpoint = %+v, %v; want only the endpoint written", cfg, changed)
	}

	stale := *inSync
	stale.Peers = append([]wgtypes.Peer{{PublicKey: wgtypes.Key(other)}}, inSync.Peers...)
	cfg, changed = Diff(&stale, want)
	if !changed || len(cfg.Peers) != 1 || cfg.Peers[0].PublicKey != wgtypes.Key(other) || !cfg.Peers[0].Remove {
		t.Errorf("Diff with a foreign peer = %+v, %v; want it removed and nothing else", cfg, changed)
	}

	// A standby has the key and the port but no peer: the peer goes, and
	// a device without one stays as it is.
	standby := want
	standby.Peer = plan.WireGuardPeer{}
	cfg, changed = Diff(inSync, standby)
	if !changed || len(cfg.Peers) != 1 || cfg.Peers[0].PublicKey != wgtypes.Key(peer) || !cfg.Peers[0].Remove || cfg.PrivateKey != nil {
		t.Errorf("Diff to a standby = %+v, %v; want the peer removed and nothing else", cfg, changed)
	}
	bare := &wgtypes.Device{PrivateKey: wgtypes.Key(priv), ListenPort: 51840}
	if cfg, changed := Diff(bare, standby); changed {
		t.Errorf("Diff of a standby in sync = %+v, want no change", cfg)
	}
}

// TestUserspaceDevice runs wireguard-go in a fresh namespace: wgctrl and
// `wg show` see it through the UAPI socket, Sync writes once then nothing,
// and the device reports itself closed when its link is deleted by hand.
func TestUserspaceDevice(t *testing.T) {
	if !netns.InNamespace(t) {
		return
	}
	const name = "plwgtest0"
	dev, err := Open(name, Userspace, 1340, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if dev.Implementation() != Userspace {
		t.Errorf("Implementation() = %s", dev.Implementation())
	}
	link, err := netlink.LinkByName(name)
	if err != nil || link.Attrs().MTU != 1340 {
		t.Fatalf("link %s: %v, mtu %v; want mtu 1340", name, err, link)
	}

	want := plan.WireGuard{
		PrivateKey: mustKey(t),
		ListenPort: 51999,
		Peer: plan.WireGuardPeer{
			PublicKey:           mustKey(t).PublicKey(),
			Endpoint:            netip.MustParseAddrPort("192.0.2.1:51840"),
			AllowedIPs:          []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
			PersistentKeepalive: 25 * time.Second,
		},
	}
	if changed, err := Sync(dev, want); err != nil || !changed {
		t.Fatalf("first Sync = %v, %v; want a write", changed, err)
	}
	if changed, err := Sync(dev, want); err != nil || changed {
		t.Fatalf("second Sync = %v, %v; want nothing written", changed, err)
	}
	if wg, err := exec.LookPath("wg"); err == nil {
		out, err := exec.Command(wg, "show", name).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "listening port: 51999") || !strings.Contains(string(out), "endpoint: 192.0.2.1:51840") {
			t.Errorf("wg show %s: %v\n%s", name, err, out)
		}
	}
	if err := Rehandshake(dev, want); err != nil {
		t.Fatalf("Rehandshake: %v", err)
	}
	if changed, err := Sync(dev, want); err != nil || changed {
		t.Fatalf("Sync after Rehandshake = %v, %v; want the peer back as it was", changed, err)
	}

	if err := netlink.LinkDel(link); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := dev.Device()
		if errors.Is(err, ErrClosed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Device() after the link was deleted = %v, want ErrClosed", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAutoChoosesTheKernelWhenItCan checks the automatic choice against
// what the kernel offers: the kernel back-end where WireGuard links can be
// created, the userspace one otherwise, with ErrNotSupported reported for
// an explicit kernel request.
func TestAutoChoosesTheKernelWhenItCan(t *testing.T) {
	if !netns.InNamespace(t) {
		return
	}
	want := Kernel
	if err := KernelAvailable(); err != nil {
		if !errors.Is(err, ErrNotSupported) {
			t.Fatalf("KernelAvailable() = %v, want nil or ErrNotSupported", err)
		}
		if _, err := Open("plwgtest1", Kernel, 1340, logr.Discard()); !errors.Is(err, ErrNotSupported) {
			t.Fatalf("Open(kernel) without kernel WireGuard = %v, want ErrNotSupported", err)
		}
		want = Userspace
	}
	dev, err := Open("plwgtest1", Auto, 1340, logr.Discard())
	if err != nil {
		t.Fatalf("Open(auto): %v", err)
	}
	defer dev.Close()
	if dev.Implementation() != want {
		t.Errorf("Open(auto) chose %s, want %s", dev.Implementation(), want)
	}
	if _, err := dev.Device(); err != nil {
		t.Errorf("wgctrl does not see the %s device: %v", want, err)
	}
}

// TestRenameAdoptsTheOldLink renames a link of the old name, and leaves
// things alone when there is none or when the new name is taken.
func TestRenameAdoptsTheOldLink(t *testing.T) {
	if !netns.InNamespace(t) {
		return
	}
	if err := Rename("pltestold", "pltestnew"); err != nil {
		t.Fatalf("rename without an old link: %v", err)
	}
	// A veth stands for the kernel WireGuard link, which this kernel may
	// lack: renaming does not look at the kind.
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "pltestold", MTU: 1340}, PeerName: "pltestpeer1"}); err != nil {
		t.Fatal(err)
	}
	if err := Rename("pltestold", "pltestnew"); err != nil {
		t.Fatal(err)
	}
	if l, err := netlink.LinkByName("pltestnew"); err != nil || l.Attrs().MTU != 1340 {
		t.Fatalf("renamed link: %v, %v", l, err)
	}
	if _, err := netlink.LinkByName("pltestold"); err == nil {
		t.Error("the old link is still there")
	}
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "pltestold"}, PeerName: "pltestpeer2"}); err != nil {
		t.Fatal(err)
	}
	if err := Rename("pltestold", "pltestnew"); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName("pltestold"); err != nil {
		t.Error("the old link was touched although the new name is taken")
	}
}

// TestDiffWithNextKey checks a peer known under two keys: the next key is
// added as a second peer without allowed IPs or keepalive, the allowed IPs
// stay with whichever key holds them, and go to the public key only when
// neither does.
func TestDiffWithNextKey(t *testing.T) {
	priv, old, next := mustKey(t), mustKey(t).PublicKey(), mustKey(t).PublicKey()
	ranges := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	want := plan.WireGuard{
		PrivateKey: priv,
		Peer: plan.WireGuardPeer{
			PublicKey: old, NextPublicKey: next,
			Endpoint:            netip.MustParseAddrPort("192.0.2.1:51840"),
			AllowedIPs:          ranges,
			PersistentKeepalive: 25 * time.Second,
		},
	}
	endpoint := &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 51840}
	held := []net.IPNet{{IP: net.IPv4(10, 244, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}}
	holding := func(k plan.Key) wgtypes.Peer {
		return wgtypes.Peer{PublicKey: wgtypes.Key(k), Endpoint: endpoint, AllowedIPs: held, PersistentKeepaliveInterval: 25 * time.Second}
	}
	waiting := func(k plan.Key) wgtypes.Peer { return wgtypes.Peer{PublicKey: wgtypes.Key(k), Endpoint: endpoint} }

	cur := &wgtypes.Device{PrivateKey: wgtypes.Key(priv), Peers: []wgtypes.Peer{holding(old)}}
	cfg, changed := Diff(cur, want)
	if !changed || len(cfg.Peers) != 1 || cfg.Peers[0].PublicKey != wgtypes.Key(next) || cfg.Peers[0].Remove ||
		len(cfg.Peers[0].AllowedIPs) != 0 || cfg.Peers[0].Endpoint == nil ||
		cfg.Peers[0].PersistentKeepaliveInterval == nil || *cfg.Peers[0].PersistentKeepaliveInterval != 0 {
		t.Errorf("Diff announcing a next key = %+v, %v; want the next key added with the endpoint, no allowed IPs, no keepalive", cfg, changed)
	}
	if got := Holder(cur, want.Peer); got != old {
		t.Errorf("Holder = %s, want the current key %s", got, old)
	}

	for name, peers := range map[string][]wgtypes.Peer{
		"current key holds": {holding(old), waiting(next)},
		"next key holds":    {waiting(old), holding(next)},
	} {
		if cfg, changed := Diff(&wgtypes.Device{PrivateKey: wgtypes.Key(priv), Peers: peers}, want); changed {
			t.Errorf("%s: Diff = %+v, want no change: the allowed IPs stay where they are", name, cfg)
		}
	}

	// Both peers there, neither holding (a device that lost them): the
	// current key gets them.
	cur = &wgtypes.Device{PrivateKey: wgtypes.Key(priv), Peers: []wgtypes.Peer{waiting(old), waiting(next)}}
	cfg, changed = Diff(cur, want)
	if !changed || len(cfg.Peers) != 1 || cfg.Peers[0].PublicKey != wgtypes.Key(old) || !cfg.Peers[0].ReplaceAllowedIPs || len(cfg.Peers[0].AllowedIPs) != 1 {
		t.Errorf("Diff with no holder = %+v, %v; want the allowed IPs given to the current key", cfg, changed)
	}

	// The next key holds them, and the plan makes it the only key (the
	// old one retired or promoted away): the old peer goes, nothing else.
	promoted := want
	promoted.Peer.PublicKey, promoted.Peer.NextPublicKey = next, plan.Key{}
	cur = &wgtypes.Device{PrivateKey: wgtypes.Key(priv), Peers: []wgtypes.Peer{waiting(old), holding(next)}}
	cfg, changed = Diff(cur, promoted)
	if !changed || len(cfg.Peers) != 1 || cfg.Peers[0].PublicKey != wgtypes.Key(old) || !cfg.Peers[0].Remove {
		t.Errorf("Diff after the old key retired = %+v, %v; want the old peer removed and nothing else", cfg, changed)
	}
}
