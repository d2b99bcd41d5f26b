package clusterinfo

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/peerlink/peerlink/internal/cidr"
)

func TestRoundTrip(t *testing.T) {
	in := Info{
		ClusterID:         "cluster-a",
		PodCIDRs:          cidr.MustPrefixes("10.244.0.0/16", "10.245.0.0/16"),
		ServiceCIDR:       netip.MustParsePrefix("10.96.0.0/12"),
		ExternalCIDR:      netip.MustParsePrefix("10.70.0.0/16"),
		InternalCIDR:      netip.MustParsePrefix("10.80.0.0/16"),
		AllowedPeer:       cidr.MustPrefixes("10.0.0.0/8"),
		RoutedPeer:        cidr.MustPrefixes("10.200.0.0/16", "10.201.0.0/16"),
		ControllerVersion: "v0.3.0",
		Sources:           map[string]string{KeyClusterID: SourceGiven, KeyPodCIDRs: SourceNodes, KeyServiceCIDR: SourceServiceCIDRAPI},
	}
	out, err := Decode(in.Data())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("decoded %+v, want %+v", out, in)
	}

	// The default allowlist is written out, so a reader needs no default.
	def := Info{ClusterID: "b", PodCIDRs: cidr.MustPrefixes("10.244.0.0/16")}
	data := def.Data()
	if data[KeyAllowedPeerCIDRs] != "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7" {
		t.Errorf("data.%s = %q, want the default allowlist", KeyAllowedPeerCIDRs, data[KeyAllowedPeerCIDRs])
	}
	// The default plan is empty: every peer range is remapped.
	if v, ok := data[KeyRoutedPeerCIDRs]; !ok || v != "" {
		t.Errorf("data.%s = %q (set: %t), want it written empty", KeyRoutedPeerCIDRs, v, ok)
	}
	if data[KeyServiceCIDR] != "" || data[KeyExternalCIDR] != "" {
		t.Errorf("unset ranges encoded as %q and %q, want empty", data[KeyServiceCIDR], data[KeyExternalCIDR])
	}
	got, err := Decode(data)
	if err != nil || got.ServiceCIDR.IsValid() || got.ExternalCIDR.IsValid() {
		t.Errorf("decode of unset ranges: %+v, %v", got, err)
	}
}

func TestDecodeErrorsNameTheKey(t *testing.T) {
	valid := map[string]string{KeyClusterID: "a", KeyPodCIDRs: "10.244.0.0/16"}
	for _, tc := range []struct {
		name, key, value string
	}{
		{"no cluster id", KeyClusterID, ""},
		{"cluster id not a label", KeyClusterID, "Cluster_A"},
		{"cluster id too long", KeyClusterID, strings.Repeat("a", 60)},
		{"no pod cidr", KeyPodCIDRs, ""},
		{"pod cidr with host bits", KeyPodCIDRs, "10.244.0.1/16"},
		{"pod cidr not a cidr", KeyPodCIDRs, "10.244.0.0/16,nope"},
		{"service cidr", KeyServiceCIDR, "10.96.0.0/33"},
		{"external cidr", KeyExternalCIDR, "x"},
		{"internal cidr", KeyInternalCIDR, "10.80.0.1/16"},
		{"allowlist", KeyAllowedPeerCIDRs, "10.0.0.0/8,bad"},
		{"plan", KeyRoutedPeerCIDRs, "10.0.0.1/8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string]string{}
			for k, v := range valid {
				data[k] = v
			}
			data[tc.key] = tc.value
			_, err := Decode(data)
			if err == nil || !strings.HasPrefix(err.Error(), "data."+tc.key+": ") {
				t.Errorf("error %v, want one naming data.%s", err, tc.key)
			}
		})
	}
}

func TestRead(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	if _, err := Read(t.Context(), c, "peerlink"); !errors.Is(err, ErrNotPublished) {
		t.Errorf("read of a missing ConfigMap: %v, want ErrNotPublished", err)
	}
	if _, err := ReadControllerVersion(t.Context(), c, "peerlink"); !errors.Is(err, ErrNotPublished) {
		t.Errorf("version read of a missing ConfigMap: %v, want ErrNotPublished", err)
	}
	info := Info{ClusterID: "a", PodCIDRs: cidr.MustPrefixes("10.244.0.0/16"), ControllerVersion: "v0.3.0"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: "peerlink"}, Data: info.Data()}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	got, err := Read(t.Context(), c, "peerlink")
	if err != nil || got.ClusterID != "a" {
		t.Errorf("read %+v, %v", got, err)
	}
	cm.Data[KeyPodCIDRs] = "bad"
	if err := c.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(t.Context(), c, "peerlink"); err == nil || !strings.Contains(err.Error(), "configmap peerlink/"+Name+": data."+KeyPodCIDRs) {
		t.Errorf("read of a bad ConfigMap: %v, want an error naming the ConfigMap and the key", err)
	}
	// The version is read whatever the facts hold, so that a version skew
	// can be told even when it is what broke them.
	if v, err := ReadControllerVersion(t.Context(), c, "peerlink"); v != "v0.3.0" || err != nil {
		t.Errorf("controller version of a bad ConfigMap: %q, %v, want v0.3.0", v, err)
	}
}
