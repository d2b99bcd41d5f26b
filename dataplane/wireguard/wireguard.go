package wireguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/go-logr/logr"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/peerlink/peerlink/dataplane/plan"
)

// Implementation names a WireGuard back-end.
type Implementation string

// The back-ends, and Auto for "kernel when the kernel has WireGuard,
// userspace otherwise".
const (
	Auto      Implementation = "auto"
	Kernel    Implementation = "kernel"
	Userspace Implementation = "userspace"
)

var (
	// ErrNotSupported reports that the requested back-end cannot run here:
	// the kernel has no WireGuard, or /dev/net/tun is missing.
	ErrNotSupported = errors.New("wireguard implementation not supported")
	// ErrClosed reports a call on a Device after Close, or after its
	// userspace device stopped because its TUN link was deleted.
	ErrClosed = errors.New("wireguard device closed")
)

// Device is a WireGuard link under the agent's control.
type Device interface {
	// Device reports the device's configuration and peer statistics.
	Device() (*wgtypes.Device, error)
	// Configure applies a wgctrl configuration to the device.
	Configure(cfg wgtypes.Config) error
	// Implementation is the back-end in use, Kernel or Userspace.
	Implementation() Implementation
	// Close stops the device and deletes its link.
	Close() error
}

// Open creates the WireGuard link name with the given MTU, or adopts it when
// it already exists as a link of the chosen back-end (a restarted agent keeps
// a kernel tunnel and its sessions). With Auto the kernel back-end is tried
// first. The link is set up; its addresses are the caller's business.
func Open(name string, impl Implementation, mtu int, log logr.Logger) (Device, error) {
	switch impl {
	case Kernel:
		return openKernel(name, mtu)
	case Userspace:
		return openUserspace(name, mtu, log)
	case Auto:
		dev, err := openKernel(name, mtu)
		if err == nil {
			return dev, nil
		}
		if !errors.Is(err, ErrNotSupported) {
			return nil, err
		}
		log.Info("kernel WireGuard not available, using the embedded wireguard-go", "reason", err.Error())
		return openUserspace(name, mtu, log)
	}
	return nil, fmt.Errorf("open wireguard device %s: unknown implementation %q", name, impl)
}

// FindPeer returns the peer of dev whose public key is key, or nil.
func FindPeer(dev *wgtypes.Device, key plan.Key) *wgtypes.Peer {
	for i := range dev.Peers {
		if dev.Peers[i].PublicKey == wgtypes.Key(key) {
			return &dev.Peers[i]
		}
	}
	return nil
}

// Diff returns the wgctrl configuration that turns cur into want, and false
// when cur already matches. Peers other than want's are removed (all of
// them when want has no peer, its key zero); an endpoint is written only
// when want names one that differs.
func Diff(cur *wgtypes.Device, want plan.WireGuard) (wgtypes.Config, bool) {
	var cfg wgtypes.Config
	changed := false
	if k := wgtypes.Key(want.PrivateKey); cur.PrivateKey != k {
		cfg.PrivateKey = &k
		changed = true
	}
	if want.ListenPort != 0 && cur.ListenPort != want.ListenPort {
		p := want.ListenPort
		cfg.ListenPort = &p
		changed = true
	}
	wantKey := wgtypes.Key(want.Peer.PublicKey)
	peer := FindPeer(cur, want.Peer.PublicKey)
	for _, p := range cur.Peers {
		if p.PublicKey != wantKey {
			cfg.Peers = append(cfg.Peers, wgtypes.PeerConfig{PublicKey: p.PublicKey, Remove: true})
			changed = true
		}
	}
	if want.Peer.PublicKey == (plan.Key{}) {
		return cfg, changed
	}
	pc := wgtypes.PeerConfig{PublicKey: wantKey}
	peerChanged := peer == nil
	if want.Peer.Endpoint.IsValid() && (peer == nil || !sameEndpoint(peer.Endpoint, want.Peer.Endpoint)) {
		pc.Endpoint = net.UDPAddrFromAddrPort(want.Peer.Endpoint)
		peerChanged = true
	}
	if peer == nil || peer.PersistentKeepaliveInterval != want.Peer.PersistentKeepalive {
		ka := want.Peer.PersistentKeepalive
		pc.PersistentKeepaliveInterval = &ka
		peerChanged = true
	}
	if peer == nil || !sameAllowedIPs(peer.AllowedIPs, want.Peer.AllowedIPs) {
		pc.ReplaceAllowedIPs = true
		for _, p := range want.Peer.AllowedIPs {
			pc.AllowedIPs = append(pc.AllowedIPs, net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())})
		}
		peerChanged = true
	}
	if peerChanged {
		cfg.Peers = append(cfg.Peers, pc)
		changed = true
	}
	return cfg, changed
}

// Sync brings dev to want, writing only what differs. It reports whether
// anything was written.
func Sync(dev Device, want plan.WireGuard) (bool, error) {
	cur, err := dev.Device()
	if err != nil {
		return false, err
	}
	cfg, changed := Diff(cur, want)
	if !changed {
		return false, nil
	}
	if err := dev.Configure(cfg); err != nil {
		return false, err
	}
	return true, nil
}

// Rehandshake drops the sessions with the peer identified by key and adds it
// back with want's settings, so that the next packet starts a fresh
// handshake. A client uses it when its peer's device was recreated: the old
// session is unknown to the new device and WireGuard alone would notice only
// after its 15-second rekey timeout.
func Rehandshake(dev Device, want plan.WireGuard) error {
	if err := dev.Configure(wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: wgtypes.Key(want.Peer.PublicKey), Remove: true}}}); err != nil {
		return fmt.Errorf("remove peer %s: %w", want.Peer.PublicKey, err)
	}
	cur, err := dev.Device()
	if err != nil {
		return err
	}
	cfg, _ := Diff(cur, want)
	if err := dev.Configure(cfg); err != nil {
		return fmt.Errorf("add peer %s back: %w", want.Peer.PublicKey, err)
	}
	return nil
}

func sameEndpoint(cur *net.UDPAddr, want netip.AddrPort) bool {
	if cur == nil {
		return false
	}
	ap := cur.AddrPort()
	return ap.Addr().Unmap() == want.Addr().Unmap() && ap.Port() == want.Port()
}

func sameAllowedIPs(cur []net.IPNet, want []netip.Prefix) bool {
	got := make([]netip.Prefix, 0, len(cur))
	for _, n := range cur {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			return false
		}
		bits, _ := n.Mask.Size()
		got = append(got, netip.PrefixFrom(a.Unmap(), bits))
	}
	slices.SortFunc(got, netip.Prefix.Compare)
	return slices.Equal(got, slices.SortedFunc(slices.Values(want), netip.Prefix.Compare))
}
