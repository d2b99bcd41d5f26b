package wireguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

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

// MovesOnInitiation reports whether dev moves a peer's allowed IPs to its
// other key itself, on the handshake initiation that starts a session with
// it (the userspace device does). Without, the gateway agent moves them
// (MoveAllowedIPs) once it sees the handshake completed, and the packets the
// new session carries before are dropped.
func MovesOnInitiation(dev Device) bool {
	_, ok := dev.(*userspaceDevice)
	return ok
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

// PeerKeys are the keys want's peer is known under: its public key, and its
// next key while it has one; none for a device without a peer.
func PeerKeys(want plan.WireGuardPeer) []plan.Key {
	switch {
	case want.PublicKey == (plan.Key{}):
		return nil
	case want.NextPublicKey == (plan.Key{}) || want.NextPublicKey == want.PublicKey:
		return []plan.Key{want.PublicKey}
	}
	return []plan.Key{want.PublicKey, want.NextPublicKey}
}

// Holder returns which of the keys of want's peer holds the allowed IPs on
// dev: the first of PeerKeys whose device peer has any; zero when none
// does.
func Holder(dev *wgtypes.Device, want plan.WireGuardPeer) plan.Key {
	for _, k := range PeerKeys(want) {
		if p := FindPeer(dev, k); p != nil && len(p.AllowedIPs) > 0 {
			return k
		}
	}
	return plan.Key{}
}

// Diff returns the wgctrl configuration that turns cur into want, and false
// when cur already matches. Peers other than want's are removed (all of
// them when want has no peer, its key zero); an endpoint is written only
// when want names one that differs. While the peer has a next key, both of
// its keys are peers of the device and the allowed IPs stay with whichever
// holds them (PublicKey when neither does): the device moves them itself
// when the peer starts a session with the other key.
func Diff(cur *wgtypes.Device, want plan.WireGuard) (wgtypes.Config, bool) {
	holder := Holder(cur, want.Peer)
	if holder == (plan.Key{}) {
		holder = want.Peer.PublicKey
	}
	return diff(cur, want, holder)
}

// diff is Diff with the allowed IPs given to the peer of key holder.
func diff(cur *wgtypes.Device, want plan.WireGuard, holder plan.Key) (wgtypes.Config, bool) {
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
	keys := PeerKeys(want.Peer)
	for _, p := range cur.Peers {
		if !slices.Contains(keys, plan.Key(p.PublicKey)) {
			cfg.Peers = append(cfg.Peers, wgtypes.PeerConfig{PublicKey: p.PublicKey, Remove: true})
			changed = true
		}
	}
	for _, k := range keys {
		if pc, peerChanged := diffPeer(FindPeer(cur, k), k, want.Peer, k == holder); peerChanged {
			cfg.Peers = append(cfg.Peers, pc)
			changed = true
		}
	}
	return cfg, changed
}

// diffPeer returns the configuration of the device peer of key, cur (nil
// when the device has none), that makes it want; only the holder of the
// allowed IPs has them, and a keepalive: the other key is not in use yet
// (or any more), and the device must not start sessions with it by itself.
func diffPeer(cur *wgtypes.Peer, key plan.Key, want plan.WireGuardPeer, holder bool) (wgtypes.PeerConfig, bool) {
	pc := wgtypes.PeerConfig{PublicKey: wgtypes.Key(key)}
	changed := cur == nil
	if want.Endpoint.IsValid() && (cur == nil || !sameEndpoint(cur.Endpoint, want.Endpoint)) {
		pc.Endpoint = net.UDPAddrFromAddrPort(want.Endpoint)
		changed = true
	}
	var keepalive time.Duration
	var allowed []netip.Prefix
	if holder {
		keepalive, allowed = want.PersistentKeepalive, want.AllowedIPs
	}
	if cur == nil || cur.PersistentKeepaliveInterval != keepalive {
		pc.PersistentKeepaliveInterval = &keepalive
		changed = true
	}
	if (cur == nil && len(allowed) > 0) || (cur != nil && !sameAllowedIPs(cur.AllowedIPs, allowed)) {
		pc.ReplaceAllowedIPs = true
		for _, p := range allowed {
			pc.AllowedIPs = append(pc.AllowedIPs, net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())})
		}
		changed = true
	}
	return pc, changed
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

// Rehandshake drops the sessions with the peer and adds it back with want's
// settings, so that the next packet starts a fresh handshake. A client uses
// it when its peer's device was recreated: the old session is unknown to the
// new device and WireGuard alone would notice only after its 15-second
// rekey timeout. Of a peer known under two keys, the one holding the allowed
// IPs is dropped, and gets them back.
func Rehandshake(dev Device, want plan.WireGuard) error {
	cur, err := dev.Device()
	if err != nil {
		return err
	}
	holder := Holder(cur, want.Peer)
	if holder == (plan.Key{}) {
		holder = want.Peer.PublicKey
	}
	if err := dev.Configure(wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: wgtypes.Key(holder), Remove: true}}}); err != nil {
		return fmt.Errorf("remove peer %s: %w", holder, err)
	}
	if cur, err = dev.Device(); err != nil {
		return err
	}
	cfg, _ := diff(cur, want, holder)
	if err := dev.Configure(cfg); err != nil {
		return fmt.Errorf("add peer %s back: %w", holder, err)
	}
	return nil
}

// MoveAllowedIPs gives the allowed IPs of want's peer to the device peer of
// key to, one of PeerKeys, taking them from the other. The gateway agent
// calls it for a kernel device, which cannot move them on the handshake
// itself as the userspace device does.
func MoveAllowedIPs(dev Device, want plan.WireGuard, to plan.Key) error {
	if !slices.Contains(PeerKeys(want.Peer), to) {
		return fmt.Errorf("move allowed IPs to peer %s: not a key of the configured peer", to)
	}
	cur, err := dev.Device()
	if err != nil {
		return err
	}
	cfg, changed := diff(cur, want, to)
	if !changed {
		return nil
	}
	if err := dev.Configure(cfg); err != nil {
		return fmt.Errorf("move allowed IPs to peer %s: %w", to, err)
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
