package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
	// Before the gateway says anything of the rotation, the condition
	// says it has not read the next pair; then it says what the gateway
	// says, and once the patience is out it turns False with that reason.
	waitRotationCondition(t, e, ns, metav1.ConditionTrue, netv1beta1.ReasonNextKeyNotRead)
	waiting := fmt.Sprintf("the peer's gateway does not announce that it accepts the next key %s", base64.StdEncoding.EncodeToString(next))
	setConnectionRotation(t, e, conn, netv1beta1.ReasonPeerNotAccepting, waiting)
	waitRotationCondition(t, e, ns, metav1.ConditionTrue, netv1beta1.ReasonPeerNotAccepting)
	conn.Status.Value = netv1beta1.ConnectionError
	if err := e.c.Status().Update(ctx, conn); err != nil {
		t.Fatal(err)
	}
	waitRotationCondition(t, e, ns, metav1.ConditionTrue, netv1beta1.ReasonTunnelDown)
	conn.Status.Value = netv1beta1.Connected
	if err := e.c.Status().Update(ctx, conn); err != nil {
		t.Fatal(err)
	}
	stuck := waitRotationCondition(t, e, ns, metav1.ConditionFalse, netv1beta1.ReasonPeerNotAccepting)
	if !strings.Contains(stuck.Message, waiting) || !strings.Contains(stuck.Message, "has not reached the next key pair") {
		t.Errorf("the KeyRotation condition of a rotation that waited too long: %q, want why in words", stuck.Message)
	}
	// Asked again: the same next pair, waited for anew.
	patchRotation(t, e, ns, "second, again")
	waitRotationCondition(t, e, ns, metav1.ConditionTrue, netv1beta1.ReasonPeerNotAccepting)
	if got, err := status(ctx); err != nil || !bytes.Equal(got.Status.KeyRotation.NextPublicKey, next) {
		t.Fatalf("the next key after the rotation was asked again: %v, want the same %x", err, next)
	}
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
		if r := got.Status.KeyRotation; !bytes.Equal(got.Status.PublicKey, next) || r == nil || r.Requested != "second, again" || len(r.NextPublicKey) != 0 {
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
	waitRotationCondition(t, e, ns, metav1.ConditionFalse, netv1beta1.ReasonRotated)

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

// waitRotationCondition waits until the GatewayClient "peer" of ns has a
// KeyRotation condition of status and reason, and returns it.
func waitRotationCondition(t *testing.T, e *gatewayEnv, ns string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	eventually(t, fmt.Sprintf("KeyRotation condition %s, reason %s", status, reason), func(ctx context.Context) error {
		var gw netv1beta1.GatewayClient
		if err := e.get(ctx, ns, "peer", &gw); err != nil {
			return err
		}
		c := meta.FindStatusCondition(gw.Status.Conditions, netv1beta1.ConditionKeyRotation)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("KeyRotation condition %+v", c)
		}
		got = *c
		return nil
	})
	return got
}

// setConnectionRotation writes, as the gateway agent does, where the
// rotation of its key stands.
func setConnectionRotation(t *testing.T, e *gatewayEnv, conn *netv1beta1.Connection, reason, message string) {
	t.Helper()
	conn.Status.Value = netv1beta1.Connected
	meta.SetStatusCondition(&conn.Status.Conditions, metav1.Condition{Type: netv1beta1.ConditionKeyRotation, Status: metav1.ConditionTrue, Reason: reason, Message: message})
	if err := e.c.Status().Update(t.Context(), conn); err != nil {
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

// testPromotionWaitsForRenderedKey walks rotateKeys through a rotation by
// hand, as the reconciler calls it, with the rendered gateway's report of
// its public key (what reconcile copies into status.publicKey) lagging
// behind the promotion, as it does until the rendered gateway's reconciler
// has read the promoted Secret. The rotation must not end while the status
// would name the old key alone: a peer given that key in a PublicKey
// loses the tunnel, and no later rotation can pass the tunnel again.
func testPromotionWaitsForRenderedKey(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "key-promotion")
	priv, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	old := priv.PublicKey()
	e.create(t, &corev1.Secret{ObjectMeta: objectMeta(ns, "keys"), Data: map[string][]byte{
		netv1beta1.PrivateKeyField: priv[:], netv1beta1.PublicKeyField: old[:]}})
	// Not created: no reconciler touches it; rotateKeys reads only its
	// name and generation.
	gw := &netv1beta1.GatewayClient{ObjectMeta: objectMeta(ns, "lagging")}
	conn := &netv1beta1.Connection{ObjectMeta: objectMeta(ns, "gw-lagging"), Spec: netv1beta1.ConnectionSpec{
		Type: netv1beta1.ConnectionTypeClient, GatewayRef: corev1.ObjectReference{Kind: "GatewayClient", Name: "nobody", Namespace: ns}}}
	e.create(t, conn)
	r := &gatewayReconciler[*netv1beta1.GatewayClient]{client: e.c, apiReader: e.c, rotationPatience: time.Minute}
	gs := &netv1beta1.GatewayStatus{SecretRef: &corev1.ObjectReference{Namespace: ns, Name: "keys"}, PublicKey: old[:]}
	rs := &netv1beta1.KeyRotationStatus{Requested: "first"}
	var conds []metav1.Condition
	want := keyRotation{requested: "second", generated: true}
	step := func(what string) {
		t.Helper()
		if _, err := r.rotateKeys(ctx, gw, want, gs, &rs, &conds); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if rs.Requested == want.requested && len(rs.NextPublicKey) == 0 && bytes.Equal(gs.PublicKey, old[:]) {
			t.Fatalf("%s: the rotation ended with status.publicKey the old key, which the secret no longer holds", what)
		}
	}
	step("the next pair made")
	next := rs.NextPublicKey
	if len(next) != 32 {
		t.Fatalf("status.keyRotation.nextPublicKey %x after the rotation was asked", next)
	}
	setConnectionKey(t, e, conn, next)
	step("the tunnel on the next pair, promoted at once")
	var secret corev1.Secret
	if err := e.get(ctx, ns, "keys", &secret); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret.Data[netv1beta1.PublicKeyField], next) {
		t.Fatal("the next pair was not promoted")
	}
	// The rendered gateway still reports the old key, for as many
	// reconciles as it takes.
	for i := range 3 {
		gs.PublicKey = old[:]
		step(fmt.Sprintf("reconcile %d after the promotion, the rendered gateway late", i+1))
	}
	if rs.Requested == want.requested || !bytes.Equal(rs.NextPublicKey, next) {
		t.Fatalf("keyRotation %+v while the rendered gateway reports the old key: want the rotation under way, both keys published", rs)
	}
	gs.PublicKey = next
	step("the rendered gateway reports the new key")
	if rs.Requested != want.requested || len(rs.NextPublicKey) != 0 {
		t.Fatalf("keyRotation %+v once the rendered gateway reports the new key: want it done", rs)
	}
	if c := meta.FindStatusCondition(conds, netv1beta1.ConditionKeyRotation); c == nil || c.Reason != netv1beta1.ReasonRotated {
		t.Fatalf("KeyRotation condition %+v, want reason %s", c, netv1beta1.ReasonRotated)
	}
}
