package gateway

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
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
// of Start but for the keys the peer accepts, which the prober reports, and
// the keys this side accepts, which it announces.
//
// The rotating side keeps its device on the current private key until the
// peer announces that it accepts the next one, then switches the device to
// it; without a handshake within the switch timeout it goes back and tries
// again after the retry delay (keySwitch). The other side holds a second
// peer for the announced next key and announces that it accepts it; its
// device moves the allowed IPs to that key when the peer starts a session
// with it (the agent does it for a kernel device), and once the next key has
// held them for the grace period the old key is retired: removed from the
// device, and kept out of it for as long as the agent runs (peerKeys).
type rotation struct {
	now func() time.Time
	log logr.Logger
	// planned is the WireGuard configuration of the last plan, before the
	// rotation's state made it the one applied.
	planned plan.WireGuard
	own     keySwitch
	peer    peerKeys
}

// newRotation returns the rotation state of an agent with opts.
func newRotation(opts Options, m *metrics, now func() time.Time, log logr.Logger) *rotation {
	return &rotation{
		now: now, log: log,
		own:  keySwitch{timeout: opts.keySwitchTimeout(), retry: opts.keySwitchRetry(), log: log, metrics: m},
		peer: peerKeys{grace: opts.keyGrace(), log: log},
	}
}

// plan records the planned configuration and returns the one the device is
// given.
func (r *rotation) plan(want plan.WireGuard) plan.WireGuard {
	r.planned = want
	r.peer.setNext(want.Peer.NextPublicKey)
	return r.effective(want)
}

// effective returns the configuration the device is given for the planned
// one: on the next private key while the device runs on it, without the
// peer's retired key.
func (r *rotation) effective(want plan.WireGuard) plan.WireGuard {
	return r.peer.effective(r.own.effective(want))
}

// step advances a rotation under way, on either side, on dev, whose
// applied configuration is applied. It reports whether the device is to
// be configured anew (sync).
func (r *rotation) step(dev wireguard.Device, applied plan.WireGuard) bool {
	if r.planned.NextPrivateKey == (plan.Key{}) && r.planned.Peer.NextPublicKey == (plan.Key{}) {
		return false
	}
	cur, err := dev.Device()
	if err != nil {
		r.log.Error(err, "read the WireGuard device for the key rotation")
		return false
	}
	now := r.now()
	changed := false
	if r.planned.NextPrivateKey != (plan.Key{}) {
		changed = r.own.step(now, cur, applied, r.planned.NextPrivateKey)
	}
	if r.planned.Peer.NextPublicKey != (plan.Key{}) {
		changed = r.peer.step(now, dev, cur, applied) || changed
	}
	return changed
}

// phase says where the rotation of this side's key stands.
func (r *rotation) phase() keyRotationPhase { return r.own.phase(r.planned.NextPrivateKey) }

// restore takes the public key the tunnel ran on in the last run from
// the Connection.
func (r *rotation) restore(ctx context.Context, conn *connectionWriter) {
	key, err := conn.lastPublicKey(ctx)
	if err != nil {
		r.log.Error(err, "read the public key the tunnel ran on")
		return
	}
	r.own.lastKey = key
}

// reportKey writes the public key the tunnel runs on, as applied, and
// where a rotation of this side's key stands, to the Connection, when they
// changed.
func (r *rotation) reportKey(ctx context.Context, conn *connectionWriter, applied *dataplane.GatewayPlan) {
	if applied == nil || applied.WireGuard.PrivateKey == (plan.Key{}) {
		return
	}
	if err := conn.reportKey(ctx, applied.WireGuard.PrivateKey.PublicKey(), r.phase()); err != nil {
		r.log.Error(err, "write the public key the tunnel runs on to the Connection")
	}
}

// keySwitch is the rotating side's state: the switch to this side's next
// private key.
type keySwitch struct {
	// timeout and retry time a switch (Options.KeySwitchTimeout,
	// KeySwitchRetry).
	timeout, retry time.Duration
	log            logr.Logger
	metrics        *metrics

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

	mu sync.Mutex
	// accepted are the keys of this side the peer last said it accepts.
	accepted []plan.Key
}

// setAccepted records the keys the peer says it accepts.
func (s *keySwitch) setAccepted(keys []plan.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepted = keys
}

// accepts reports whether the peer said it accepts key.
func (s *keySwitch) accepts(key plan.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.accepted, key)
}

// effective puts want on the next private key while the device runs on it.
func (s *keySwitch) effective(want plan.WireGuard) plan.WireGuard {
	if !s.started {
		// A device the last run switched keeps its key across a restart:
		// the peer may know the new key alone by now.
		s.started = true
		if want.NextPrivateKey != (plan.Key{}) && s.lastKey == want.NextPrivateKey.PublicKey() {
			s.inUse = want.NextPrivateKey
		}
	}
	if s.inUse != (plan.Key{}) && s.inUse != want.NextPrivateKey {
		// The key Secret changed: the next key became the current one
		// (promoted), or was replaced or dropped.
		s.inUse, s.switchedAt = plan.Key{}, time.Time{}
	}
	if s.inUse != (plan.Key{}) {
		want.PrivateKey = s.inUse
	}
	return want
}

// phase says where the switch to next, the planned next key, stands.
func (s *keySwitch) phase(next plan.Key) keyRotationPhase {
	if next == (plan.Key{}) {
		return keyRotationPhase{}
	}
	pub := next.PublicKey()
	switch {
	case s.inUse != (plan.Key{}) && s.switchedAt.IsZero():
		return keyRotationPhase{netv1beta1.ReasonOnNextKey, fmt.Sprintf("the tunnel runs on the next key %s", pub)}
	case s.inUse != (plan.Key{}):
		return keyRotationPhase{netv1beta1.ReasonSwitching, fmt.Sprintf("the tunnel moved to the next key %s and waits for a handshake with it (at most %s)",
			pub, s.timeout)}
	case s.reverts > 0:
		return keyRotationPhase{netv1beta1.ReasonNoHandshake, fmt.Sprintf(
			"no handshake on the next key %s within %s, %d times: the tunnel went back to the current key and tries again every %s "+
				"(the peer's gateway announces that it accepts the key, yet does not answer with it)",
			pub, s.timeout, s.reverts, s.retry)}
	}
	return keyRotationPhase{netv1beta1.ReasonPeerNotAccepting, fmt.Sprintf(
		"the tunnel runs on the current key: the peer's gateway does not announce that it accepts the next key %s "+
			"(the peer must apply this cluster's PublicKey holding it as spec.nextPublicKey)", pub)}
}

// step switches the device to the next private key once the peer accepts
// it, confirms the switch on the first handshake after it, and goes back
// to the current key when none came in time. It reports whether the device
// is to be given another key.
func (s *keySwitch) step(now time.Time, dev *wgtypes.Device, applied plan.WireGuard, next plan.Key) bool {
	switch {
	case s.inUse == (plan.Key{}):
		if now.Before(s.retryAt) || !s.accepts(next.PublicKey()) {
			return false
		}
		s.inUse, s.switchedAt = next, now
		s.log.Info("the peer accepts the next key: switching the tunnel to it", "publicKey", next.PublicKey())
		return true
	case s.switchedAt.IsZero():
		return false
	}
	peer := wireguard.FindPeer(dev, wireguard.Holder(dev, applied.Peer))
	if peer != nil && peer.LastHandshakeTime.After(s.switchedAt) {
		s.switchedAt = time.Time{}
		s.metrics.observeKeySwitch(switchDone)
		s.log.Info("the tunnel runs on the next key: a handshake with it succeeded", "publicKey", next.PublicKey())
		return false
	}
	if now.Sub(s.switchedAt) < s.timeout {
		return false
	}
	s.inUse, s.switchedAt, s.retryAt = plan.Key{}, time.Time{}, now.Add(s.retry)
	s.reverts++
	s.metrics.observeKeySwitch(switchReverted)
	s.log.Info("no handshake with the next key: back to the current key, trying again later (the peer may not know the next key yet, or its gateway lost it)",
		"publicKey", next.PublicKey(), "timeout", s.timeout, "retryIn", s.retry)
	return true
}

// peerKeys is the other side's state: the peer's switch to its next key.
type peerKeys struct {
	// grace is how long the next key holds the allowed IPs before the old
	// one is retired (Options.KeyGrace).
	grace time.Duration
	log   logr.Logger

	// retired is the peer's former key, removed from the device.
	retired plan.Key
	// heldSince is since when the peer's next key holds the allowed IPs
	// after a handshake; zero while it does not.
	heldSince time.Time

	mu sync.Mutex
	// next is the peer's next key of the last plan, which the prober
	// announces this side accepts.
	next plan.Key
}

// setNext records the peer's next key of the last plan.
func (p *peerKeys) setNext(key plan.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = key
}

// acceptedKeys are the peer's keys this side announces it accepts: the
// peer's next key, while there is one.
func (p *peerKeys) acceptedKeys() []plan.Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == (plan.Key{}) {
		return nil
	}
	return []plan.Key{p.next}
}

// effective leaves the peer's retired key out of want.
func (p *peerKeys) effective(want plan.WireGuard) plan.WireGuard {
	if p.retired != (plan.Key{}) && p.retired != want.Peer.PublicKey {
		p.retired = plan.Key{}
	}
	if p.retired != (plan.Key{}) && want.Peer.NextPublicKey != (plan.Key{}) {
		want.Peer.PublicKey, want.Peer.NextPublicKey = want.Peer.NextPublicKey, plan.Key{}
	}
	return want
}

// step follows the peer's switch to its next key: for a kernel device it
// gives the allowed IPs to the key with the latest handshake (the
// userspace device moves them itself, on the handshake), and once the next
// key has held them for the grace period it retires the old key. It
// reports whether the device's peers are to change.
func (p *peerKeys) step(now time.Time, dev wireguard.Device, cur *wgtypes.Device, want plan.WireGuard) bool {
	if p.retired != (plan.Key{}) {
		return false
	}
	oldKey, nextKey := want.Peer.PublicKey, want.Peer.NextPublicKey
	oldPeer, nextPeer := wireguard.FindPeer(cur, oldKey), wireguard.FindPeer(cur, nextKey)
	if oldPeer == nil || nextPeer == nil {
		return false
	}
	holder := wireguard.Holder(cur, want.Peer)
	if !wireguard.MovesOnInitiation(dev) {
		latest := oldKey
		if nextPeer.LastHandshakeTime.After(oldPeer.LastHandshakeTime) {
			latest = nextKey
		}
		if latest != holder {
			if err := wireguard.MoveAllowedIPs(dev, want, latest); err != nil {
				p.log.Error(err, "move the allowed IPs to the key the peer shook hands with last")
				return false
			}
			p.log.Info("the peer shook hands with its other key: its allowed IPs moved to it (a kernel device drops what the new session carried before)", "peer", latest)
			holder = latest
		}
	}
	if holder != nextKey || nextPeer.LastHandshakeTime.IsZero() {
		p.heldSince = time.Time{}
		return false
	}
	if p.heldSince.IsZero() {
		p.heldSince = now
	}
	if now.Sub(p.heldSince) < p.grace {
		return false
	}
	p.retired, p.heldSince = oldKey, time.Time{}
	p.log.Info("the peer's next key has carried the tunnel for the grace period: its old key is retired", "retired", oldKey, "peer", nextKey, "grace", p.grace)
	return true
}

// keyRotationPhase is where a rotation of this side's key stands, as the
// Connection's KeyRotation condition says it; the zero value: none is
// under way.
type keyRotationPhase struct {
	reason, message string
}
