package gateway

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/apply"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

// Reasons about a gateway's key pair.
const (
	// ReasonSecretNotFound: the Secret named in spec.secretRef does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonInvalidKeys: the key Secret does not hold a WireGuard key pair.
	ReasonInvalidKeys = "InvalidKeys"
)

// ensureKeys makes sure the key Secret of a gateway exists and holds a valid
// key pair, and returns a reference to it and the public key, which the
// gateway publishes in its status so that nobody needs to read the Secret
// to hand the public key to the peer.
//
// The generated Secret gw-<gateway> is created when missing, with a fresh
// pair, and never rewritten: the peer holds its public key, so a new pair
// would silently break the tunnel. An invalid or missing Secret stalls the
// gateway with a message naming the Secret and the field.
//
// The Secret is read live through reader because Secrets are watched by
// metadata only, so that key material stays out of the controller's cache.
// Nothing derived from the private key but the Secret itself is ever built
// here: errors name fields and lengths, never values, and nothing is logged.
func ensureKeys(ctx context.Context, c client.Client, reader client.Reader, key types.NamespacedName,
	generated bool, labels map[string]string, owner metav1.OwnerReference) (*corev1.ObjectReference, wgtypes.Key, error) {
	ref := &corev1.ObjectReference{Name: key.Name, Namespace: key.Namespace}
	// client-go logs request and response bodies through the context's
	// logger at verbosity 8 and above, and a key Secret's body holds its
	// private key: its requests go without a logger.
	ctx = logr.NewContext(ctx, logr.Discard())
	var secret corev1.Secret
	err := reader.Get(ctx, key, &secret)
	switch {
	case apierrors.IsNotFound(err) && generated:
		s, pub, err := newKeySecret(key, labels, owner)
		if err != nil {
			return nil, wgtypes.Key{}, err
		}
		// Create, not apply: it fails when the Secret appeared meanwhile,
		// so an existing pair is never overwritten.
		if err := c.Create(ctx, s, client.FieldOwner(api.FieldManager)); err != nil {
			return nil, wgtypes.Key{}, fmt.Errorf("create secret %s: %w", key, err)
		}
		return ref, pub, nil
	case apierrors.IsNotFound(err):
		return nil, wgtypes.Key{}, outcome.Stall(ReasonSecretNotFound, "spec.secretRef.name: secret %s not found", key)
	case err != nil:
		return nil, wgtypes.Key{}, fmt.Errorf("get secret %s: %w", key, err)
	}
	// A generated key Secret is the controller's own: one someone else put
	// under its name would give the gateway a key its maker knows.
	if c := metav1.GetControllerOfNoCopy(&secret); generated && (c == nil || c.UID != owner.UID) {
		return nil, wgtypes.Key{}, outcome.Stall(apply.ReasonForeignObject, "Secret %s exists and is not controlled by %s %s: peerlink does not take over objects it did not make; delete or rename it",
			key, owner.Kind, owner.Name)
	}
	pub, err := validateKeys(&secret)
	if err != nil {
		return nil, wgtypes.Key{}, outcome.Stall(ReasonInvalidKeys, "%v", err)
	}
	return ref, pub, nil
}

// newKeySecret builds a Secret holding a freshly generated key pair, and
// returns it with the public key.
func newKeySecret(key types.NamespacedName, labels map[string]string, owner metav1.OwnerReference) (*corev1.Secret, wgtypes.Key, error) {
	priv, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		return nil, wgtypes.Key{}, fmt.Errorf("generate key pair for secret %s: %w", key, err)
	}
	pub := priv.PublicKey()
	l := map[string]string{netv1beta1.GatewayResourceLabel: "true"}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            key.Name,
			Namespace:       key.Namespace,
			Labels:          l,
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			netv1beta1.PrivateKeyField: priv[:],
			netv1beta1.PublicKeyField:  pub[:],
		},
	}, pub, nil
}

// validateKeys checks that a Secret holds a WireGuard key pair: privateKey
// and publicKey of 32 raw bytes each, the second derived from the first. It
// returns the public key.
func validateKeys(s *corev1.Secret) (wgtypes.Key, error) {
	priv, err := keyField(s, netv1beta1.PrivateKeyField)
	if err != nil {
		return wgtypes.Key{}, err
	}
	pub, err := keyField(s, netv1beta1.PublicKeyField)
	if err != nil {
		return wgtypes.Key{}, err
	}
	if priv.PublicKey() != pub {
		return wgtypes.Key{}, fmt.Errorf("secret %s/%s: data.%s is not the public key of data.%s",
			s.Namespace, s.Name, netv1beta1.PublicKeyField, netv1beta1.PrivateKeyField)
	}
	return pub, nil
}

// keyField returns the key held in one data field of a Secret.
func keyField(s *corev1.Secret, field string) (wgtypes.Key, error) {
	v, ok := s.Data[field]
	if !ok {
		return wgtypes.Key{}, fmt.Errorf("secret %s/%s: data.%s is missing", s.Namespace, s.Name, field)
	}
	if len(v) != wgtypes.KeyLen {
		return wgtypes.Key{}, fmt.Errorf("secret %s/%s: data.%s must be %d bytes, got %d",
			s.Namespace, s.Name, field, wgtypes.KeyLen, len(v))
	}
	return wgtypes.Key(v), nil
}
