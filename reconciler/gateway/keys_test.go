package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

func TestValidateKeys(t *testing.T) {
	priv, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.PublicKey()
	other, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data map[string][]byte
		want string
	}{
		{"valid", map[string][]byte{"privateKey": priv[:], "publicKey": pub[:]}, ""},
		{"short private key", map[string][]byte{"privateKey": priv[:31], "publicKey": pub[:]},
			"secret ns/keys: data.privateKey must be 32 bytes, got 31"},
		{"long public key", map[string][]byte{"privateKey": priv[:], "publicKey": append(pub[:], 0)},
			"secret ns/keys: data.publicKey must be 32 bytes, got 33"},
		{"no private key", map[string][]byte{"publicKey": pub[:]},
			"secret ns/keys: data.privateKey is missing"},
		{"no public key", map[string][]byte{"privateKey": priv[:]},
			"secret ns/keys: data.publicKey is missing"},
		{"keys of two pairs", map[string][]byte{"privateKey": other[:], "publicKey": pub[:]},
			"secret ns/keys: data.publicKey is not the public key of data.privateKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "keys"}, Data: tc.data}
			_, err := validateKeys(s)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestNewKeySecret(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: "networking.liqo.io/v1beta1", Kind: "WgGatewayServer", Name: "peer", UID: "u1"}
	key := types.NamespacedName{Namespace: "ns", Name: "gw-peer"}
	a, pub, err := newKeySecret(key, map[string]string{netv1beta1.RemoteClusterIDLabel: "r1"}, owner)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := newKeySecret(key, nil, owner)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := validateKeys(a); err != nil || got != pub {
		t.Errorf("validateKeys of the generated secret = %v, %v; want the returned public key %v", got, err, pub)
	}
	if bytes.Equal(a.Data[netv1beta1.PrivateKeyField], b.Data[netv1beta1.PrivateKeyField]) {
		t.Error("two generated secrets hold the same private key")
	}
	want := map[string]string{netv1beta1.RemoteClusterIDLabel: "r1", netv1beta1.GatewayResourceLabel: "true"}
	if fmt.Sprint(a.Labels) != fmt.Sprint(want) {
		t.Errorf("labels %v, want %v", a.Labels, want)
	}
}

// checkPrivateKeyConfined checks that the private key of secret appears in no
// object of the cluster but secret itself, in any namespace and of any
// resource, nor in the controller's log: as raw bytes, base64, hex or numbers.
func (e *gatewayEnv) checkPrivateKeyConfined(t *testing.T, secret *corev1.Secret) {
	t.Helper()
	ctx := t.Context()
	priv := secret.Data[netv1beta1.PrivateKeyField]
	if len(priv) != wgtypes.KeyLen {
		t.Fatalf("secret %s/%s holds no private key", secret.Namespace, secret.Name)
	}
	forms := map[string]string{
		"raw":       string(priv),
		"base64":    base64.StdEncoding.EncodeToString(priv),
		"base64url": base64.URLEncoding.EncodeToString(priv),
		"hex":       hex.EncodeToString(priv),
		// How loggers and encoders print a byte slice as numbers.
		"decimal":    strings.Trim(fmt.Sprint(priv), "[]"),
		"json array": strings.ReplaceAll(strings.Trim(fmt.Sprint(priv), "[]"), " ", ","),
	}
	find := func(text string) []string {
		var found []string
		for name, f := range forms {
			if strings.Contains(text, f) {
				found = append(found, name)
			}
		}
		return found
	}

	dc, err := discovery.NewDiscoveryClientForConfig(e.cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatalf("discover resources: %v", err)
	}
	scanned := map[string]int{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range list.APIResources {
			if strings.Contains(res.Name, "/") || !hasVerb(res.Verbs, "list") {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(res.Name)).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Errorf("list %s: %v", res.Name, err)
				continue
			}
			for _, item := range items.Items {
				scanned[res.Name]++
				if item.GetUID() == secret.UID {
					continue
				}
				data, err := json.Marshal(item.Object)
				if err != nil {
					t.Fatal(err)
				}
				found := find(string(data))
				// Raw bytes are escaped in JSON: look into every string too.
				walkStrings(item.Object, func(s string) { found = append(found, find(s)...) })
				if len(found) > 0 {
					t.Errorf("the private key of secret %s/%s appears (%v) in %s %s/%s",
						secret.Namespace, secret.Name, found, res.Name, item.GetNamespace(), item.GetName())
				}
			}
		}
	}
	for _, res := range []string{"secrets", "events", "wggatewayservers", "deployments", "pods", "configmaps"} {
		if scanned[res] == 0 {
			t.Errorf("no %s scanned: the search missed objects (scanned %v)", res, scanned)
		}
	}
	if found := find(string(e.logs.Bytes())); len(found) > 0 {
		t.Errorf("the private key of secret %s/%s appears (%v) in the controller's log", secret.Namespace, secret.Name, found)
	}
	if len(e.logs.Bytes()) == 0 {
		t.Error("the controller's log is empty: nothing was searched")
	}
}

// hasVerb tells whether verbs holds v.
func hasVerb(verbs metav1.Verbs, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

// walkStrings calls f with every string in a decoded JSON value.
func walkStrings(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case map[string]any:
		for k, e := range v {
			f(k)
			walkStrings(e, f)
		}
	case []any:
		for _, e := range v {
			walkStrings(e, f)
		}
	}
}

func testKeysConfined(t *testing.T, e *gatewayEnv) {
	ns := e.namespace(t, "keys-confined")
	e.create(t, newGatewayServer(ns, "server", "remote-s", corev1.ServiceTypeNodePort, nil))
	e.create(t, &netv1beta1.GatewayClient{ObjectMeta: peerMeta(ns, "client", "remote-c2")})
	e.createNode(t, "node-keys", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.20"})
	e.runGatewayPod(t, ns, "server", "node-keys", "10.244.0.20")
	gatewayServerKind().waitReady(t, e, ns, "server", metav1.ConditionTrue, outcome.ReasonReconciled, nil)
	gatewayClientKind().waitReady(t, e, ns, "client", metav1.ConditionFalse, netv1beta1.ReasonWaitingForEndpoint, nil)
	for _, name := range []string{"gw-server", "gw-client"} {
		var secret corev1.Secret
		if err := e.get(t.Context(), ns, name, &secret); err != nil {
			t.Fatal(err)
		}
		e.checkPrivateKeyConfined(t, &secret)
	}
}
