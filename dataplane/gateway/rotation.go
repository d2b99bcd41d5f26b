package gateway

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/wireguard"
)

// Defaults of the key rotation's timing options.
const (
	// DefaultKeySwitchTimeout is how long a switch to the next key may
	// wait for a handshake before the device goes back to the current key.
	DefaultKeySwitchTimeout = 5 * time.Second
	// DefaultKeySwitchRetry is how long after going back a switch is tried
	// again.
	DefaultKeySwitchRetry = 30 * time.Second
	// DefaultKeyGrace is how long the peer's next key holds the allowed IPs
	// before the peer's old key is removed from the device.
	DefaultKeyGrace = 30 * time.Second
)

// rotationPoll is the pace at which the agent looks at the device while a
// key rotation is under way, on either side.
const rotationPoll = 250 * time.Millisecond

// Results of a switch to the next key, as the metric labels them.
const (
	switchDone     = "done"
	switchReverted = "reverted"
)

// rotation is the state of a key rotation, touched only by the goroutine
// of Start but for the keys the peer accepts, which the prober reports.
//
// The rotating side keeps its device on the current private key until the
// peer announces that it accepts the next one, then switches the device to
// it; without a handshake within the switch timeout it goes back and tries
// again after the retry delay. The other side holds a second peer for the
// announced next key and announces that it accepts it; its device moves the
// allowed IPs to that key when the peer starts a session with it (the agent
// does it for a kernel device), and once the next key has held them for the
// grace period the old key is retired: removed from the device, and kept
// out of it for as long as the agent runs.
type rotation struct {
	// inUse is the next private key while the device runs on it; zero
	// while it runs on the current one.
	inUse plan.Key
	// switchedAt is when the device switched to inUse, zero once a
	// handshake confirmed it.
	switchedAt time.Time
	// retryAt is the earliest time of the next switch after going back.
	retryAt time.Time
	// reverts counts the switches to the next key that went back for
	// want of a handshake.
	reverts int
	// started is set once the state was taken from the last run.
	started bool
	// lastKey is the public key the last run reported the tunnel ran on.
	lastKey plan.Key

	// retired is the peer's former key, removed from the device.
	retired plan.Key
	// heldSince is since when the peer's next key holds the allowed IPs
	// after a handshake; zero while it does not.
	heldSince time.Time

	mu sync.Mutex
	// accepted are the keys of this side the peer last said it accepts.
	accepted []plan.Key
}

// setAccepted records the keys the peer says it accepts.
func (r *rotation) setAccepted(keys []plan.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.accepted = keys
}

// accepts reports whether the peer said it accepts key.
func (r *rotation) accepts(key plan.Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.accepted, key)
}

// effective returns the configuration the device is given for the planned
// one: on the next private key while the device runs on it, without the
// peer's retired key.
func (r *rotation) effective(want plan.WireGuard) plan.WireGuard {
	if !r.started {
		// A device the last run switched keeps its key across a restart:
		// the peer may know the new key alone by now.
		r.started = true
		if want.NextPrivateKey != (plan.Key{}) && r.lastKey == want.NextPrivateKey.PublicKey() {
			r.inUse = want.NextPrivateKey
		}
	}
	if r.inUse != (plan.Key{}) && r.inUse != want.NextPrivateKey {
		// The key Secret changed: the next key became the current one
		// (promoted), or was replaced or dropped.
		r.inUse, r.switchedAt = plan.Key{}, time.Time{}
	}
	if r.inUse != (plan.Key{}) {
		want.PrivateKey = r.inUse
	}
	if r.retired != (plan.Key{}) && r.retired != want.Peer.PublicKey {
		r.retired = plan.Key{}
	}
	if r.retired != (plan.Key{}) && want.Peer.NextPublicKey != (plan.Key{}) {
		want.Peer.PublicKey, want.Peer.NextPublicKey = want.Peer.NextPublicKey, plan.Key{}
	}
	return want
}

// acceptedKeys are the peer's keys this side announces it accepts: the
// peer's next key, while there is one.
func (a *Agent) acceptedKeys() []plan.Key {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.peerNextKey == (plan.Key{}) {
		return nil
	}
	return []plan.Key{a.peerNextKey}
}

// reportKey writes the public key the tunnel runs on, and where a
// rotation of this side's key stands, to the Connection, when they
// changed.
func (a *Agent) reportKey(ctx context.Context) {
	if a.applied == nil || a.applied.WireGuard.PrivateKey == (plan.Key{}) {
		return
	}
	phase := a.rotationPhase()
	if err := a.conn.reportKey(ctx, a.applied.WireGuard.PrivateKey.PublicKey(), phase); err != nil {
		a.log.Error(err, "write the public key the tunnel runs on to the Connection")
	}
}

// keyRotationPhase is where a rotation of this side's key stands, as the
// Connection's KeyRotation condition says it; the zero value: none is
// under way.
type keyRotationPhase struct {
	reason, message string
}

// rotationPhase says where the rotation of this side's key stands.
func (a *Agent) rotationPhase() keyRotationPhase {
	r := &a.rotation
	next := a.planned.NextPrivateKey
	if next == (plan.Key{}) {
		return keyRotationPhase{}
	}
	pub := next.PublicKey()
	switch {
	case r.inUse != (plan.Key{}) && r.switchedAt.IsZero():
		return keyRotationPhase{netv1beta1.ReasonOnNextKey, fmt.Sprintf("the tunnel runs on the next key %s", pub)}
	case r.inUse != (plan.Key{}):
		return keyRotationPhase{netv1beta1.ReasonSwitching, fmt.Sprintf("the tunnel moved to the next key %s and waits for a handshake with it (at most %s)",
			pub, a.opts.keySwitchTimeout())}
	case r.reverts > 0:
		return keyRotationPhase{netv1beta1.ReasonNoHandshake, fmt.Sprintf(
			"no handshake on the next key %s within %s, %d times: the tunnel went back to the current key and tries again every %s "+
				"(the peer's gateway announces that it accepts the key, yet does not answer with it)",
			pub, a.opts.keySwitchTimeout(), r.reverts, a.opts.keySwitchRetry())}
	}
	return keyRotationPhase{netv1beta1.ReasonPeerNotAccepting, fmt.Sprintf(
		"the tunnel runs on the current key: the peer's gateway does not announce that it accepts the next key %s "+
			"(the peer must apply this cluster's PublicKey holding it as spec.nextPublicKey)", pub)}
}

// stepRotation advances a key rotation under way, on either side. It
// reports whether the device is to be configured anew (sync).
func (a *Agent) stepRotation() bool {
	if a.dev == nil || a.applied == nil || !a.active.Load() {
		return false
	}
	if a.planned.NextPrivateKey == (plan.Key{}) && a.planned.Peer.NextPublicKey == (plan.Key{}) {
		return false
	}
	dev, err := a.dev.Device()
	if err != nil {
		a.log.Error(err, "read the WireGuard device for the key rotation")
		return false
	}
	now := a.now()
	changed := false
	if a.planned.NextPrivateKey != (plan.Key{}) {
		changed = a.stepKeySwitch(now, dev)
	}
	if a.planned.Peer.NextPublicKey != (plan.Key{}) {
		changed = a.stepPeerKeys(now, dev) || changed
	}
	return changed
}

// stepKeySwitch switches the device to the next private key once the peer
// accepts it, confirms the switch on the first handshake after it, and
// goes back to the current key when none came in time. It reports whether
// the device is to be given another key.
func (a *Agent) stepKeySwitch(now time.Time, dev *wgtypes.Device) bool {
	r := &a.rotation
	next := a.planned.NextPrivateKey
	switch {
	case r.inUse == (plan.Key{}):
		if now.Before(r.retryAt) || !r.accepts(next.PublicKey()) {
			return false
		}
		r.inUse, r.switchedAt = next, now
		a.log.Info("the peer accepts the next key: switching the tunnel to it", "publicKey", next.PublicKey())
		return true
	case r.switchedAt.IsZero():
		return false
	}
	peer := wireguard.FindPeer(dev, wireguard.Holder(dev, a.applied.WireGuard.Peer))
	if peer != nil && peer.LastHandshakeTime.After(r.switchedAt) {
		r.switchedAt = time.Time{}
		a.metrics.observeKeySwitch(switchDone)
		a.log.Info("the tunnel runs on the next key: a handshake with it succeeded", "publicKey", next.PublicKey())
		return false
	}
	if now.Sub(r.switchedAt) < a.opts.keySwitchTimeout() {
		return false
	}
	r.inUse, r.switchedAt, r.retryAt = plan.Key{}, time.Time{}, now.Add(a.opts.keySwitchRetry())
	r.reverts++
	a.metrics.observeKeySwitch(switchReverted)
	a.log.Info("no handshake with the next key: back to the current key, trying again later (the peer may not know the next key yet, or its gateway lost it)",
		"publicKey", next.PublicKey(), "timeout", a.opts.keySwitchTimeout(), "retryIn", a.opts.keySwitchRetry())
	return true
}

// stepPeerKeys follows the peer's switch to its next key: for a kernel
// device it gives the allowed IPs to the key with the latest handshake
// (the userspace device moves them itself, on the handshake), and once the
// next key has held them for the grace period it retires the old key. It
// reports whether the device's peers are to change.
func (a *Agent) stepPeerKeys(now time.Time, dev *wgtypes.Device) bool {
	r := &a.rotation
	want := a.applied.WireGuard
	if r.retired != (plan.Key{}) {
		return false
	}
	oldKey, nextKey := want.Peer.PublicKey, want.Peer.NextPublicKey
	oldPeer, nextPeer := wireguard.FindPeer(dev, oldKey), wireguard.FindPeer(dev, nextKey)
	if oldPeer == nil || nextPeer == nil {
		return false
	}
	holder := wireguard.Holder(dev, want.Peer)
	if !wireguard.MovesOnInitiation(a.dev) {
		latest := oldKey
		if nextPeer.LastHandshakeTime.After(oldPeer.LastHandshakeTime) {
			latest = nextKey
		}
		if latest != holder {
			if err := wireguard.MoveAllowedIPs(a.dev, want, latest); err != nil {
				a.log.Error(err, "move the allowed IPs to the key the peer shook hands with last")
				return false
			}
			a.log.Info("the peer shook hands with its other key: its allowed IPs moved to it (a kernel device drops what the new session carried before)", "peer", latest)
			holder = latest
		}
	}
	if holder != nextKey || nextPeer.LastHandshakeTime.IsZero() {
		r.heldSince = time.Time{}
		return false
	}
	if r.heldSince.IsZero() {
		r.heldSince = now
	}
	if now.Sub(r.heldSince) < a.opts.keyGrace() {
		return false
	}
	r.retired, r.heldSince = oldKey, time.Time{}
	a.log.Info("the peer's next key has carried the tunnel for the grace period: its old key is retired", "retired", oldKey, "peer", nextKey, "grace", a.opts.keyGrace())
	return true
}
