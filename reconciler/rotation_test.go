package reconciler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// testKeyRotation rotates the key pair of a GatewayClient: a change of
// spec.keyRotation makes a next pair in the key Secret and publishes its
// public key; the pair replaces the old one only once the Connection has
// reported the tunnel running on it for the promotion delay; a gateway with
// a user's key Secret is stalled instead.
func testKeyRotation(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "key-rotation")
	gw := &netv1beta1.GatewayClient{ObjectMeta: peerMeta(ns, "peer", "remote-"+ns), Spec: netv1beta1.GatewayClientSpec{KeyRotation: "first"}}
	e.create(t, gw)
	status := func(ctx context.Context) (*netv1beta1.GatewayClient, error) {
		var got netv1beta1.GatewayClient
		return &got, e.get(ctx, ns, "peer", &got)
	}
	var first []byte
	eventually(t, "the first key pair, made with the rotation asked from the start", func(ctx context.Context) error {
		got, err := status(ctx)
		if err != nil {
			return err
		}
		if len(got.Status.PublicKey) == 0 || got.Status.KeyRotation == nil || got.Status.KeyRotation.Requested != "first" {
			return fmt.Errorf("status.publicKey %x, keyRotation %+v", got.Status.PublicKey, got.Status.KeyRotation)
		}
		first = got.Status.PublicKey
		return nil
	})
	secret := e.checkKeySecret(t, ns, "gw-peer", "remote-"+ns)
	if _, ok := secret.Data[netv1beta1.NextPrivateKeyField]; ok {
		t.Fatal("a next key pair made with the first one")
	}
	oldPrivate := secret.Data[netv1beta1.PrivateKeyField]

	patchRotation(t, e, ns, "second")
	var next []byte
	eventually(t, "the next public key published", func(ctx context.Context) error {
		got, err := status(ctx)
		if err != nil {
			return err
		}
		if r := got.Status.KeyRotation; r == nil || len(r.NextPublicKey) == 0 {
			return fmt.Errorf("keyRotation %+v", r)
		}
		next = got.Status.KeyRotation.NextPublicKey
		return nil
	})
	var s corev1.Secret
	if err := e.get(ctx, ns, "gw-peer", &s); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Data[netv1beta1.NextPublicKeyField], next) || len(s.Data[netv1beta1.NextPrivateKeyField]) != 32 ||
		!bytes.Equal(s.Data[netv1beta1.PrivateKeyField], oldPrivate) || !bytes.Equal(s.Data[netv1beta1.PublicKeyField], first) {
		t.Fatal("the key Secret does not hold the current pair and the published next one")
	}
	nextPrivate := s.Data[netv1beta1.NextPrivateKeyField]

	// The tunnel still on the current key: nothing is promoted.
	conn := &netv1beta1.Connection{ObjectMeta: objectMeta(ns, "gw-peer"), Spec: netv1beta1.ConnectionSpec{
		Type: netv1beta1.ConnectionTypeClient, GatewayRef: corev1.ObjectReference{Kind: "GatewayClient", Name: "peer", Namespace: ns}}}
	e.create(t, conn)
	setConnectionKey(t, e, conn, first)
	time.Sleep(3 * time.Second)
	if err := e.get(ctx, ns, "gw-peer", &s); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Data[netv1beta1.PrivateKeyField], oldPrivate) {
		t.Fatal("the next pair replaced the current one before the tunnel ran on it")
	}

	// The tunnel on the next key: promoted after the delay.
	setConnectionKey(t, e, conn, next)
	eventually(t, "the next pair promoted", func(ctx context.Context) error {
		got, err := status(ctx)
		if err != nil {
			return err
		}
		if r := got.Status.KeyRotation; !bytes.Equal(got.Status.PublicKey, next) || r == nil || r.Requested != "second" || len(r.NextPublicKey) != 0 {
			return fmt.Errorf("status.publicKey %x, keyRotation %+v", got.Status.PublicKey, r)
		}
		return nil
	})
	if err := e.get(ctx, ns, "gw-peer", &s); err != nil {
		t.Fatal(err)
	}
	_, hasNext := s.Data[netv1beta1.NextPrivateKeyField]
	if !bytes.Equal(s.Data[netv1beta1.PrivateKeyField], nextPrivate) || !bytes.Equal(s.Data[netv1beta1.PublicKeyField], next) || hasNext {
		t.Error("the key Secret does not hold the next pair alone")
	}

	// A user's key Secret is not peerlink's to rotate.
	user := &netv1beta1.GatewayClient{ObjectMeta: peerMeta(ns, "user", "user-"+ns),
		Spec: netv1beta1.GatewayClientSpec{SecretRef: corev1.LocalObjectReference{Name: "gw-peer"}}}
	e.create(t, user)
	eventually(t, "the user's gateway keys", func(ctx context.Context) error {
		var got netv1beta1.GatewayClient
		if err := e.get(ctx, ns, "user", &got); err != nil {
			return err
		}
		if got.Status.KeyRotation == nil {
			return errors.New("no keyRotation status")
		}
		return nil
	})
	if err := e.c.Patch(ctx, user, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"keyRotation":"x"}}`))); err != nil {
		t.Fatal(err)
	}
	gatewayClientKind().waitReady(t, e, ns, "user", metav1.ConditionFalse, ReasonKeyRotation, nil)
}

func patchRotation(t *testing.T, e *gatewayEnv, ns, value string) {
	t.Helper()
	gw := &netv1beta1.GatewayClient{ObjectMeta: objectMeta(ns, "peer")}
	if err := e.c.Patch(t.Context(), gw, client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"keyRotation":%q}}`, value))); err != nil {
		t.Fatal(err)
	}
}

// setConnectionKey writes, as the gateway agent does, the public key the
// tunnel runs on.
func setConnectionKey(t *testing.T, e *gatewayEnv, conn *netv1beta1.Connection, key []byte) {
	t.Helper()
	conn.Status.PublicKey = key
	if err := e.c.Status().Update(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
}
