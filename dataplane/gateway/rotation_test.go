package gateway

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/wireguard"
)

// kernelDouble is a WireGuard device in memory that configures itself as
// a kernel device does, an allowed IP belonging to one peer at a time. It
// cannot move allowed IPs on a handshake, so the agent does.
type kernelDouble struct{ dev wgtypes.Device }

func (d *kernelDouble) Device() (*wgtypes.Device, error) {
	c := d.dev
	c.Peers = slices.Clone(d.dev.Peers)
	return &c, nil
}

func (d *kernelDouble) Configure(cfg wgtypes.Config) error {
	if cfg.PrivateKey != nil {
		d.dev.PrivateKey = *cfg.PrivateKey
	}
	for _, pc := range cfg.Peers {
		i := slices.IndexFunc(d.dev.Peers, func(p wgtypes.Peer) bool { return p.PublicKey == pc.PublicKey })
		if pc.Remove {
			if i >= 0 {
				d.dev.Peers = slices.Delete(d.dev.Peers, i, i+1)
			}
			continue
		}
		if i < 0 {
			d.dev.Peers = append(d.dev.Peers, wgtypes.Peer{PublicKey: pc.PublicKey})
			i = len(d.dev.Peers) - 1
		}
		p := &d.dev.Peers[i]
		if pc.Endpoint != nil {
			p.Endpoint = pc.Endpoint
		}
		if pc.PersistentKeepaliveInterval != nil {
			p.PersistentKeepaliveInterval = *pc.PersistentKeepaliveInterval
		}
		if pc.ReplaceAllowedIPs {
			p.AllowedIPs = nil
		}
		for _, n := range pc.AllowedIPs {
			for j := range d.dev.Peers {
				d.dev.Peers[j].AllowedIPs = slices.DeleteFunc(d.dev.Peers[j].AllowedIPs, func(o net.IPNet) bool { return o.String() == n.String() })
			}
			p.AllowedIPs = append(p.AllowedIPs, n)
		}
	}
	return nil
}

func (d *kernelDouble) Implementation() wireguard.Implementation { return wireguard.Kernel }
func (d *kernelDouble) Close() error                             { return nil }

// handshake records a completed handshake with the peer of key at t.
func (d *kernelDouble) handshake(key plan.Key, t time.Time) {
	for i := range d.dev.Peers {
		if d.dev.Peers[i].PublicKey == wgtypes.Key(key) {
			d.dev.Peers[i].LastHandshakeTime = t
		}
	}
}

func newKey(t *testing.T) plan.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return plan.Key(k)
}

// rotationRig is the rotation of an active agent on a device double, and
// the plan applied last.
type rotationRig struct {
	*rotation
	metrics *metrics
	dev     *kernelDouble
	applied *dataplane.GatewayPlan
}

// stepRotation does what the agent's rotation tick does.
func (a *rotationRig) stepRotation() bool { return a.step(a.dev, a.applied.WireGuard) }

// rotationAgent is the rotation of an active agent with a device double,
// whose plan's WireGuard configuration is want, applied.
func rotationAgent(t *testing.T, want plan.WireGuard, now *time.Time) (*rotationRig, *kernelDouble) {
	t.Helper()
	a := newRotationRig(now)
	a.planned = want
	apply(t, a)
	return a, a.dev
}

// newRotationRig is the rotation of an agent with the default options on
// an empty device double, at the time *now.
func newRotationRig(now *time.Time) *rotationRig {
	m := newMetrics(time.Now)
	return &rotationRig{rotation: newRotation(Options{}, m, func() time.Time { return *now }, logr.Discard()), metrics: m, dev: &kernelDouble{}}
}

// apply does what the agent's sync does to the device: plan, rotation
// state, Sync.
func apply(t *testing.T, a *rotationRig) {
	t.Helper()
	eff := a.effective(a.planned)
	if _, err := wireguard.Sync(a.dev, eff); err != nil {
		t.Fatal(err)
	}
	a.applied = &dataplane.GatewayPlan{WireGuard: eff}
}

// TestKeySwitch walks the rotating side through a switch that finds no
// handshake and goes back, the wait before the next try, and a switch that
// succeeds.
func TestKeySwitch(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	current, next, peer := newKey(t), newKey(t), newKey(t).PublicKey()
	want := plan.WireGuard{PrivateKey: current, NextPrivateKey: next, Peer: plan.WireGuardPeer{
		PublicKey: peer, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}}
	a, dev := rotationAgent(t, want, &now)
	dev.handshake(peer, now)
	step := func(wantChanged bool, wantKey plan.Key, wantPhase, why string) {
		t.Helper()
		if changed := a.stepRotation(); changed != wantChanged {
			t.Fatalf("%s: stepRotation = %v, want %v", why, changed, wantChanged)
		}
		apply(t, a)
		if got := dev.dev.PrivateKey; got != wgtypes.Key(wantKey) {
			t.Fatalf("%s: the device runs on %s, want %s", why, got, wantKey)
		}
		if got := a.phase(); got.reason != wantPhase || (wantPhase != "" && !strings.Contains(got.message, next.PublicKey().String())) {
			t.Fatalf("%s: the rotation's phase is %+v, want reason %q naming the next key", why, got, wantPhase)
		}
	}

	step(false, current, netv1beta1.ReasonPeerNotAccepting, "the peer accepts nothing")
	a.own.setAccepted([]plan.Key{newKey(t).PublicKey()})
	step(false, current, netv1beta1.ReasonPeerNotAccepting, "the peer accepts another key")
	a.own.setAccepted([]plan.Key{next.PublicKey()})
	step(true, next, netv1beta1.ReasonSwitching, "the peer accepts the next key")
	now = now.Add(DefaultKeySwitchTimeout - time.Second)
	step(false, next, netv1beta1.ReasonSwitching, "within the timeout")
	now = now.Add(2 * time.Second)
	step(true, current, netv1beta1.ReasonNoHandshake, "no handshake within the timeout")
	now = now.Add(DefaultKeySwitchRetry / 2)
	step(false, current, netv1beta1.ReasonNoHandshake, "before the retry")
	now = now.Add(DefaultKeySwitchRetry)
	step(true, next, netv1beta1.ReasonSwitching, "at the retry")
	now = now.Add(time.Second)
	dev.handshake(peer, now)
	step(false, next, netv1beta1.ReasonOnNextKey, "a handshake after the switch")
	now = now.Add(time.Hour)
	step(false, next, netv1beta1.ReasonOnNextKey, "an hour after the handshake")
	if a.metrics.switches[switchDone] != 1 || a.metrics.switches[switchReverted] != 1 {
		t.Errorf("switches %v, want one done and one reverted", a.metrics.switches)
	}

	// The key Secret promoted the next key: the plan's current key is the
	// one the device runs on, and there is no next one.
	a.planned.PrivateKey, a.planned.NextPrivateKey = next, plan.Key{}
	step(false, next, "", "after the promotion")
	if a.own.inUse != (plan.Key{}) {
		t.Errorf("after the promotion the rotation still names a key in use")
	}
}

// TestKeySwitchAfterRestart: a restarted agent whose last run reported the
// next key runs on it at once, without waiting for the peer's acceptance.
func TestKeySwitchAfterRestart(t *testing.T) {
	now := time.Now()
	current, next := newKey(t), newKey(t)
	want := plan.WireGuard{PrivateKey: current, NextPrivateKey: next, Peer: plan.WireGuardPeer{PublicKey: newKey(t).PublicKey()}}
	a := newRotationRig(&now)
	a.own.lastKey = next.PublicKey()
	a.planned = want
	apply(t, a)
	if got := a.applied.WireGuard.PrivateKey; got != next {
		t.Errorf("restarted with the next key reported: runs on %s, want the next key", got.PublicKey())
	}
}

// TestPeerKeys walks the other side through the peer's switch on a kernel
// device: the allowed IPs go to the key with the latest handshake, and the
// old key is retired once the next one has held them for the grace period.
func TestPeerKeys(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old, next := newKey(t).PublicKey(), newKey(t).PublicKey()
	want := plan.WireGuard{PrivateKey: newKey(t), Peer: plan.WireGuardPeer{PublicKey: old, NextPublicKey: next,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, PersistentKeepalive: 25 * time.Second}}
	a, dev := rotationAgent(t, want, &now)
	a.peer.grace = 10 * time.Second
	if got := a.peer.acceptedKeys(); len(got) != 0 {
		// The peer's next key is recorded by plan, which this test does not run.
		t.Fatalf("acceptedKeys before a sync = %v", got)
	}
	holder := func() plan.Key { d, _ := dev.Device(); return wireguard.Holder(d, a.applied.WireGuard.Peer) }
	dev.handshake(old, now)
	if a.stepRotation() || holder() != old {
		t.Fatalf("before the peer switched: holder %s, want the old key", holder())
	}
	now = now.Add(time.Second)
	dev.handshake(next, now)
	if a.stepRotation() || holder() != next {
		t.Fatalf("after a handshake with the next key: holder %s, want the next key", holder())
	}
	now = now.Add(5 * time.Second)
	if a.stepRotation() {
		t.Fatal("the old key was retired before the grace period")
	}
	now = now.Add(6 * time.Second)
	if !a.stepRotation() {
		t.Fatal("the old key was not retired after the grace period")
	}
	apply(t, a)
	d, _ := dev.Device()
	if len(d.Peers) != 1 || wireguard.FindPeer(d, next) == nil || len(d.Peers[0].AllowedIPs) != 1 || d.Peers[0].PersistentKeepaliveInterval != 25*time.Second {
		t.Errorf("after the retirement the device has peers %+v, want the next key alone with the allowed IPs and the keepalive", d.Peers)
	}
	// A later handshake attempt with the old key finds no peer for it, and
	// a resync does not bring it back.
	apply(t, a)
	if d, _ := dev.Device(); wireguard.FindPeer(d, old) != nil {
		t.Error("the retired key came back with a resync")
	}
}
