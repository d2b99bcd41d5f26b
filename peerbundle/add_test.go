package peerbundle

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/manifests"
)

// hostileServer is what a hostile server might send: every object in
// kube-system, and a GatewayClient that names its own template, a key
// Secret of this cluster, five replicas and a key rotation, with labels of
// its choosing.
const hostileServer = `apiVersion: networking.liqo.io/v1beta1
kind: Configuration
metadata:
  name: cluster-b
  namespace: kube-system
  labels:
    liqo.io/remote-cluster-id: cluster-b
    networking.liqo.io/gateway-resource: "true"
spec:
  remote:
    cidr:
      pod: [10.244.0.0/24]
---
apiVersion: networking.liqo.io/v1beta1
kind: PublicKey
metadata:
  name: cluster-b
  namespace: liqo-tenant-cluster-a
  labels:
    liqo.io/remote-cluster-id: cluster-b
    networking.liqo.io/gateway-resource: "false"
    app.kubernetes.io/managed-by: theirs
spec:
  publicKey: BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=
---
apiVersion: networking.liqo.io/v1beta1
kind: GatewayClient
metadata:
  name: evil
  namespace: kube-system
  labels:
    liqo.io/remote-cluster-id: cluster-b
    networking.liqo.io/gateway-resource: "true"
spec:
  clientTemplateRef:
    apiVersion: networking.liqo.io/v1beta1
    kind: WgGatewayClientTemplate
    name: wireguard-client
    namespace: kube-system
  secretRef:
    name: gw-cluster-c
  replicas: 5
  keyRotation: now
  mtu: 1400
  endpoint:
    addresses: [172.18.0.3]
    port: 30851
    protocol: UDP
`

// startingBundles are the bundles a peer's file may be added to: one made
// by bundle init, one with the objects create prints but no gateway, and a
// bare kustomization.
func startingBundles(t *testing.T) map[string]func() ([]byte, []ManifestFile) {
	t.Helper()
	return map[string]func() ([]byte, []ManifestFile){
		"bundle init": func() ([]byte, []ManifestFile) {
			return initBundle(t, manifests.GatewayClientOptions{Peer: manifests.Peer{RemoteClusterID: "cluster-b"}, MTU: netv1beta1.DefaultMTU})
		},
		"create, no gateway": func() ([]byte, []ManifestFile) {
			conf, err := manifests.Configuration(manifests.ConfigurationOptions{Peer: manifests.Peer{RemoteClusterID: "cluster-b"},
				PodCIDRs: mustPrefixes(t, "10.244.0.0/24")})
			if err != nil {
				t.Fatal(err)
			}
			data, err := manifests.Marshal(manifests.FormatYAML, conf)
			if err != nil {
				t.Fatal(err)
			}
			return parseBundleFiles(t, []File{{Name: KustomizationFile, Data: newKustomization("configuration.yaml")}, {Name: "configuration.yaml", Data: data}})
		},
		"bare kustomization": func() ([]byte, []ManifestFile) {
			return []byte("resources: []\n"), nil
		},
	}
}

// TestAddNormalisesWhatThePeerSends adds a hostile server's file to each
// starting bundle: in all of them the client is this side's (the tenant
// namespace, the default template, no key Secret, no replicas, no key
// rotation) with the server's endpoint and MTU, every object lands in the
// tenant namespace of the peer, and only the remote-cluster-id label is
// kept. The client is the same whatever the bundle started as.
func TestAddNormalisesWhatThePeerSends(t *testing.T) {
	var clients []map[string]any
	for name, start := range startingBundles(t) {
		t.Run(name, func(t *testing.T) {
			k, files := start()
			res, err := AddToBundle(k, files, mustParse(t, hostileServer), rangepolicy.Policy{})
			if err != nil {
				t.Fatal(err)
			}
			objs := map[string]*unstructured.Unstructured{}
			_, written := parseBundleFiles(t, res.Files)
			for _, f := range written {
				for _, o := range f.Objects {
					objs[o.GetKind()] = o
				}
			}
			for _, kind := range []string{manifests.KindConfiguration, manifests.KindPublicKey, manifests.KindGatewayClient} {
				o := objs[kind]
				if o == nil {
					t.Fatalf("no %s written: %v", kind, res.Files)
				}
				if o.GetNamespace() != "liqo-tenant-cluster-b" {
					t.Errorf("%s in namespace %q, want liqo-tenant-cluster-b", kind, o.GetNamespace())
				}
				if want := map[string]string{netv1beta1.RemoteClusterIDLabel: "cluster-b"}; !cmp.Equal(o.GetLabels(), want) {
					t.Errorf("%s labels %v, want only %v", kind, o.GetLabels(), want)
				}
			}
			gw := objs[manifests.KindGatewayClient]
			if gw.GetName() != "cluster-b" {
				t.Errorf("GatewayClient named %q, want this side's cluster-b", gw.GetName())
			}
			spec, _, _ := unstructured.NestedMap(gw.Object, "spec")
			want := map[string]any{
				"clientTemplateRef": map[string]any{"apiVersion": "networking.liqo.io/v1beta1", "kind": "WgGatewayClientTemplate", "name": "wireguard-client"},
				"mtu":               int64(1400),
				"endpoint":          map[string]any{"addresses": []any{"172.18.0.3"}, "port": int64(30851), "protocol": "UDP"},
			}
			if diff := cmp.Diff(want, spec); diff != "" {
				t.Errorf("GatewayClient spec (-want +got):\n%s", diff)
			}
			clients = append(clients, spec)
			notes := strings.Join(res.Notes, "\n")
			if !strings.Contains(notes, "spec.clientTemplateRef, spec.keyRotation, spec.replicas, spec.secretRef of the peer's GatewayClient not taken") {
				t.Errorf("notes do not say what was left out:\n%s", notes)
			}
			if !strings.Contains(string(res.Kustomization), "gatewayclient.yaml") {
				t.Errorf("kustomization does not list the client:\n%s", res.Kustomization)
			}
		})
	}
	for i := 1; i < len(clients); i++ {
		if diff := cmp.Diff(clients[0], clients[i]); diff != "" {
			t.Errorf("the client depends on how the bundle started:\n%s", diff)
		}
	}
}

// TestAddTakesThePortList adds a server's GatewayClient whose port is
// written in list form only: the list is taken with the rest of the
// endpoint, and the note names the port it holds.
func TestAddTakesThePortList(t *testing.T) {
	sent := strings.Replace(hostileServer, "    port: 30851\n", "    ports: [30851]\n", 1)
	k, files := startingBundles(t)["bundle init"]()
	res, err := AddToBundle(k, files, mustParse(t, sent), rangepolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	_, written := parseBundleFiles(t, res.Files)
	var endpoint map[string]any
	for _, f := range written {
		for _, o := range f.Objects {
			if o.GetKind() == manifests.KindGatewayClient {
				endpoint, _, _ = unstructured.NestedMap(o.Object, "spec", "endpoint")
			}
		}
	}
	want := map[string]any{"addresses": []any{"172.18.0.3"}, "ports": []any{int64(30851)}, "protocol": "UDP"}
	if diff := cmp.Diff(want, endpoint); diff != "" {
		t.Errorf("GatewayClient spec.endpoint (-want +got):\n%s", diff)
	}
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "endpoint set to 172.18.0.3 port 30851") {
		t.Errorf("notes do not name the port:\n%s", notes)
	}
}

// TestAddOnePublicKeyPerPeer adds two files of a peer that rotated its
// key, under another object name: the bundle holds one PublicKey, the
// later one's key under the earlier one's name.
func TestAddOnePublicKeyPerPeer(t *testing.T) {
	k, files := initClientBundle(t)
	first := readFromServer(t)
	res, err := AddToBundle(k, files, mustParse(t, first), rangepolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	files = mergeFiles(t, files, res.Files)
	second := strings.NewReplacer(
		"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "CAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg=",
		"kind: PublicKey\nmetadata:\n  name: cluster-b", "kind: PublicKey\nmetadata:\n  name: cluster-b-rotated",
		"kind: Configuration\nmetadata:\n  name: cluster-b", "kind: Configuration\nmetadata:\n  name: cluster-b-2",
	).Replace(first)
	res, err = AddToBundle(res.Kustomization, files, mustParse(t, second), rangepolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	files = mergeFiles(t, files, res.Files)
	var keys, confs []*unstructured.Unstructured
	for _, f := range files {
		for _, o := range f.Objects {
			switch o.GetKind() {
			case manifests.KindPublicKey:
				keys = append(keys, o)
			case manifests.KindConfiguration:
				confs = append(confs, o)
			}
		}
	}
	if len(keys) != 1 || len(confs) != 1 {
		t.Fatalf("%d PublicKeys and %d Configurations after two adds, want one of each", len(keys), len(confs))
	}
	if key, _, _ := unstructured.NestedString(keys[0].Object, "spec", "publicKey"); key != "CAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg=" || keys[0].GetName() != "cluster-b" {
		t.Errorf("PublicKey %s holds %s, want the later key under the first name", keys[0].GetName(), key)
	}
	if strings.Count(string(res.Kustomization), "publickey") != 1 {
		t.Errorf("kustomization lists more than one key file:\n%s", res.Kustomization)
	}
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "PublicKey cluster-b-rotated: replaces PublicKey cluster-b of the bundle") {
		t.Errorf("notes do not report the replacement:\n%s", notes)
	}

	// A bundle already holding two is refused, naming both.
	dup := append(mergeFiles(t, nil, nil), files...)
	dup = append(dup, ManifestFile{Name: "publickey-2.yaml", Objects: []*unstructured.Unstructured{keys[0].DeepCopy()}})
	dup[len(dup)-1].Objects[0].SetName("other")
	if _, err := AddToBundle(res.Kustomization, dup, mustParse(t, second), rangepolicy.Policy{}); err == nil ||
		!strings.Contains(err.Error(), "the bundle already holds 2 PublicKeys of peer cluster-b (cluster-b in publickey.yaml, other in publickey-2.yaml)") {
		t.Fatalf("two keys in the bundle: %v", err)
	}
}

// TestAddRefusesAPeerOfNoBundle adds to a bare kustomization a file whose
// objects name two peers, or a peer ID that cannot name a namespace.
func TestAddRefusesAPeerOfNoBundle(t *testing.T) {
	mixed := strings.Replace(readFromServer(t), "liqo.io/remote-cluster-id: cluster-b", "liqo.io/remote-cluster-id: cluster-c", 1)
	if _, err := AddToBundle([]byte("resources: []\n"), nil, mustParse(t, mixed), rangepolicy.Policy{}); err == nil ||
		!strings.Contains(err.Error(), `document 2 (PublicKey cluster-b): metadata.labels[liqo.io/remote-cluster-id] is "cluster-b" but this bundle is for peer "cluster-c"`) {
		t.Fatalf("two peers: %v", err)
	}
	bad := strings.ReplaceAll(readFromServer(t), "liqo.io/remote-cluster-id: cluster-b", "liqo.io/remote-cluster-id: Cluster_B")
	if _, err := AddToBundle([]byte("resources: []\n"), nil, mustParse(t, bad), rangepolicy.Policy{}); err == nil ||
		!strings.Contains(err.Error(), `document 1 (Configuration cluster-b): metadata.labels[liqo.io/remote-cluster-id]: cluster id "Cluster_B" is not valid`) {
		t.Fatalf("a peer ID that names no namespace: %v", err)
	}
}

// mergeFiles is files with those of written replacing or joining them.
func mergeFiles(t *testing.T, files []ManifestFile, written []File) []ManifestFile {
	t.Helper()
	_, parsed := parseBundleFiles(t, written)
	out := []ManifestFile{}
	for _, f := range files {
		replaced := false
		for _, p := range parsed {
			replaced = replaced || p.Name == f.Name
		}
		if !replaced {
			out = append(out, f)
		}
	}
	return append(out, parsed...)
}

func mustPrefixes(t *testing.T, ss ...string) []netip.Prefix {
	t.Helper()
	ps, err := manifests.ParseCIDRList(ss...)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
