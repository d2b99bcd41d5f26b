package reconciler

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
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
//
// A gateway's first key pair is made with the value spec.keyRotation has
// then: a manifest that names a rotation from the start rotates nothing.
func (r *gatewayReconciler[T]) rotateKeys(ctx context.Context, gw client.Object, want keyRotation, gs *netv1beta1.GatewayStatus, rs **netv1beta1.KeyRotationStatus) (time.Duration, error) {
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
		return 0, stall(ReasonKeyRotation, "spec.keyRotation: the key pair is the Secret named in spec.secretRef, which peerlink does not write: "+
			"replace the keys there, or remove spec.secretRef to have peerlink generate and rotate them")
	}
	// No logger on the Secret's requests: its body holds private keys.
	ctx = logr.NewContext(ctx, logr.Discard())
	key := types.NamespacedName{Namespace: gs.SecretRef.Namespace, Name: gs.SecretRef.Name}
	var secret corev1.Secret
	if err := r.apiReader.Get(ctx, key, &secret); err != nil {
		return 0, fmt.Errorf("get key secret %s: %w", key, err)
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
		return 0, nil // the Connection's change brings the next reconcile
	}
	now := time.Now()
	if st.InUseSince == nil {
		st.InUseSince = &metav1.Time{Time: now}
	}
	if wait := st.InUseSince.Add(r.promoteDelay).Sub(now); wait > 0 {
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
	gs.PublicKey = next
	*rs = &netv1beta1.KeyRotationStatus{Requested: want.requested}
	return 0, nil
}
