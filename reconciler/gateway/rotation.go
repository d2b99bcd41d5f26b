package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

// ReasonKeyRotation: spec.keyRotation asks for what cannot be done.
const ReasonKeyRotation = "KeyRotation"

// keyPromoteDelay is how long, by default, the gateway must have run the
// tunnel on the next key pair before the pair replaces the old one. It is longer than
// the gateway's wait for a handshake with the next key (5 s), after which
// the gateway goes back to the old key, which must still be there.
const keyPromoteDelay = 30 * time.Second

// keyRotation is what a gateway asks of its key rotation: the value of
// spec.keyRotation, and whether its key pair is generated (the only kind
// that can be rotated).
type keyRotation struct {
	requested string
	generated bool
}

// rotateKeys carries out the key rotation a gateway asks for, one step per
// reconcile, and reports it in rs. It returns how soon to look again; zero
// when nothing waits for time.
//
//  1. spec.keyRotation differs from what was last acted on: a next key pair
//     is made in the key Secret (nextPrivateKey, nextPublicKey) and its
//     public key published in status.keyRotation.nextPublicKey, for the
//     peer's PublicKey. The gateway keeps the tunnel on the current pair.
//  2. The peer's gateway says it accepts the next key: the gateway moves the
//     tunnel to it and reports so in its Connection's status.publicKey.
//  3. promoteDelay later the next pair replaces the current one in the
//     Secret and the old private key is gone.
//  4. The rendered gateway reports the new pair as its public key (it reads
//     the Secret): only then is the rotation done, status.publicKey the
//     new key and the next key cleared, in one write. Until then the
//     status names both keys: the old one alone would be a PublicKey that
//     breaks the tunnel once the peer applies it.
//
// A gateway's first key pair is made with the value spec.keyRotation has
// then: a manifest that names a rotation from the start rotates nothing.
func (r *gatewayReconciler[T]) rotateKeys(ctx context.Context, gw client.Object, want keyRotation, gs *netv1beta1.GatewayStatus, rs **netv1beta1.KeyRotationStatus, conds *[]metav1.Condition) (time.Duration, error) {
	if gs.SecretRef == nil || len(gs.PublicKey) == 0 {
		return 0, nil // no key pair yet
	}
	if *rs == nil {
		*rs = &netv1beta1.KeyRotationStatus{Requested: want.requested}
		return 0, nil
	}
	st := *rs
	if st.Requested == want.requested && len(st.NextPublicKey) == 0 {
		return 0, nil
	}
	if !want.generated {
		return 0, outcome.Stall(ReasonKeyRotation, "spec.keyRotation: the key pair is the Secret named in spec.secretRef, which peerlink does not write: "+
			"replace the keys there, or remove spec.secretRef to have peerlink generate and rotate them")
	}
	// No logger on the Secret's requests: its body holds private keys.
	ctx = logr.NewContext(ctx, logr.Discard())
	key := types.NamespacedName{Namespace: gs.SecretRef.Namespace, Name: gs.SecretRef.Name}
	var secret corev1.Secret
	if err := r.apiReader.Get(ctx, key, &secret); err != nil {
		return 0, fmt.Errorf("get key secret %s: %w", key, err)
	}
	now := time.Now()
	if st.Answering != want.requested || st.Started == nil {
		// Asked again: the same next pair, the wait anew.
		st.Answering, st.Started = want.requested, &metav1.Time{Time: now}
	}
	if len(st.NextPublicKey) > 0 && bytes.Equal(secret.Data[netv1beta1.PublicKeyField], st.NextPublicKey) {
		// Promoted: done once the rendered gateway reports the new key;
		// its status change brings the next reconcile.
		if !bytes.Equal(gs.PublicKey, st.NextPublicKey) {
			return 0, nil
		}
		setRotationCondition(gw, conds, metav1.ConditionFalse, netv1beta1.ReasonRotated, fmt.Sprintf(
			"the key pair asked for at %s is the only one; the old pair is forgotten", st.Started.UTC().Format(time.RFC3339)))
		*rs = &netv1beta1.KeyRotationStatus{Requested: want.requested}
		return 0, nil
	}
	next, hasNext := secret.Data[netv1beta1.NextPublicKeyField]
	if !hasNext {
		priv, err := wgtypes.GeneratePrivateKey()
		if err != nil {
			return 0, fmt.Errorf("generate the next key pair of secret %s: %w", key, err)
		}
		pub := priv.PublicKey()
		secret.Data[netv1beta1.NextPrivateKeyField] = priv[:]
		secret.Data[netv1beta1.NextPublicKeyField] = pub[:]
		if err := r.client.Update(ctx, &secret, client.FieldOwner(api.FieldManager)); err != nil {
			return 0, fmt.Errorf("write the next key pair into secret %s: %w", key, err)
		}
		next = pub[:]
	}
	if !bytes.Equal(st.NextPublicKey, next) {
		st.NextPublicKey, st.InUseSince = next, nil
	}
	var conn netv1beta1.Connection
	err := r.client.Get(ctx, types.NamespacedName{Namespace: gw.GetNamespace(), Name: childName(gw.GetName())}, &conn)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("get connection of %s: %w", gw.GetName(), err)
	}
	if !bytes.Equal(conn.Status.PublicKey, next) {
		st.InUseSince = nil
		// The Connection's change brings the next reconcile; the
		// condition turns False when the rotation has waited too long.
		return r.reportRotation(gw, conds, st, &conn, now), nil
	}
	if st.InUseSince == nil {
		st.InUseSince = &metav1.Time{Time: now}
	}
	wait := st.InUseSince.Add(r.promoteDelay).Sub(now)
	setRotationCondition(gw, conds, metav1.ConditionTrue, netv1beta1.ReasonOnNextKey, fmt.Sprintf(
		"the tunnel runs on the next key pair since %s; it replaces the old pair at %s",
		st.InUseSince.UTC().Format(time.RFC3339), st.InUseSince.Add(r.promoteDelay).UTC().Format(time.RFC3339)))
	if wait > 0 {
		return wait, nil
	}
	secret.Data[netv1beta1.PrivateKeyField] = secret.Data[netv1beta1.NextPrivateKeyField]
	secret.Data[netv1beta1.PublicKeyField] = next
	delete(secret.Data, netv1beta1.NextPrivateKeyField)
	delete(secret.Data, netv1beta1.NextPublicKeyField)
	if _, err := validateKeys(&secret); err != nil {
		return 0, fmt.Errorf("promote the next key pair of secret %s: %w", key, err)
	}
	if err := r.client.Update(ctx, &secret, client.FieldOwner(api.FieldManager)); err != nil {
		return 0, fmt.Errorf("promote the next key pair of secret %s: %w", key, err)
	}
	setRotationCondition(gw, conds, metav1.ConditionTrue, netv1beta1.ReasonOnNextKey,
		"the next key pair replaced the old one in the key Secret; waiting for the rendered gateway to report it")
	return 0, nil
}

// keyRotationPatience is how long a rotation may wait for the tunnel to
// run on the next key pair before its condition turns False, naming the
// step it waits for. It goes on waiting: the step may still come (the
// peer applies its PublicKey late), and a new spec.keyRotation starts the
// wait anew.
const keyRotationPatience = 10 * time.Minute

// reportRotation sets the KeyRotation condition of a rotation whose tunnel
// does not run on the next pair yet, from what the gateway reports of it
// on its Connection, and returns when to look again: when the patience
// runs out.
func (r *gatewayReconciler[T]) reportRotation(gw client.Object, conds *[]metav1.Condition, st *netv1beta1.KeyRotationStatus, conn *netv1beta1.Connection, now time.Time) time.Duration {
	reason := netv1beta1.ReasonNextKeyNotRead
	message := "the gateway has not read the next key pair from its key Secret yet (the kubelet refreshes the Secret in the pod within about a minute)"
	// The gateway's own condition speaks of this rotation when it names
	// its next key.
	if c := meta.FindStatusCondition(conn.Status.Conditions, netv1beta1.ConditionKeyRotation); c != nil &&
		strings.Contains(c.Message, base64.StdEncoding.EncodeToString(st.NextPublicKey)) {
		reason, message = c.Reason, c.Message
	}
	if reason != netv1beta1.ReasonNextKeyNotRead && conn.Status.Value != netv1beta1.Connected {
		// The peer's acceptance and the handshake both cross the tunnel.
		reason = netv1beta1.ReasonTunnelDown
		message = fmt.Sprintf("the tunnel is %s (Connection %s): the peer's gateway can neither announce that it accepts the next key nor shake hands with it; "+
			"check that both sides' PublicKeys hold each other's current key", cmp.Or(string(conn.Status.Value), "not reported"), childName(gw.GetName()))
	}
	waited := now.Sub(st.Started.Time)
	if waited < r.rotationPatience {
		setRotationCondition(gw, conds, metav1.ConditionTrue, reason, message)
		return r.rotationPatience - waited
	}
	setRotationCondition(gw, conds, metav1.ConditionFalse, reason, fmt.Sprintf(
		"the key rotation started at %s has not reached the next key pair after %s: %s. It goes on once that is fixed; "+
			"the tunnel keeps running on the current pair, and spec.keyRotation (peerlink rotate-key) may be changed again at any time",
		st.Started.UTC().Format(time.RFC3339), waited.Round(time.Second), message))
	return 0
}

// setRotationCondition sets the KeyRotation condition of gw.
func setRotationCondition(gw client.Object, conds *[]metav1.Condition, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: netv1beta1.ConditionKeyRotation, Status: status,
		Reason: reason, Message: message, ObservedGeneration: gw.GetGeneration()})
}
