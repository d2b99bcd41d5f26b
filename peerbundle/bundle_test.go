package peerbundle

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/manifests"
)

// initClientBundle returns the files of a client bundle for cluster-b, as
// parsed manifest files, and its kustomization.
func initClientBundle(t *testing.T) ([]byte, []ManifestFile) {
	t.Helper()
	return initBundle(t, manifests.GatewayClientOptions{Peer: manifests.Peer{RemoteClusterID: "cluster-b"}, MTU: 1340, TemplateName: "custom-client"})
}

// initBundle returns the files bundle init writes for the GatewayClient of
// o, as parsed manifest files, and its kustomization.
func initBundle(t *testing.T, o manifests.GatewayClientOptions) ([]byte, []ManifestFile) {
	t.Helper()
	gw, err := manifests.GatewayClient(o)
	if err != nil {
		t.Fatal(err)
	}
	files, err := InitBundle(gw)
	if err != nil {
		t.Fatal(err)
	}
	return parseBundleFiles(t, files)
}

func parseBundleFiles(t *testing.T, files []File) ([]byte, []ManifestFile) {
	t.Helper()
	var k []byte
	var out []ManifestFile
	for _, f := range files {
		if f.Name == KustomizationFile {
			k = f.Data
			continue
		}
		objs, err := manifests.ParseManifests(f.Data)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		out = append(out, ManifestFile{Name: f.Name, Objects: objs})
	}
	return k, out
}

// readFromServer returns what a server's bundle export hands the client
// cluster-a, as a careless or hostile peer might send it; the CLI's tests
// of bundle add read it too.
func readFromServer(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "bundles", "add", "from-server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustParse(t *testing.T, s string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.ParseManifests([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestAddToBundle(t *testing.T) {
	fromServer := readFromServer(t)
	k, files := initClientBundle(t)
	res, err := AddToBundle(k, files, mustParse(t, fromServer), rangepolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range res.Files {
		got[f.Name] = string(f.Data)
	}
	if len(got) != 3 || got["configuration.yaml"] == "" || got["publickey.yaml"] == "" || got["gatewayclient.yaml"] == "" {
		t.Fatalf("want configuration, publickey and gatewayclient files, got %v", res.Files)
	}
	conf := got["configuration.yaml"]
	for _, unwanted := range []string{"uid", "resourceVersion", "status", "last-applied", "10.71.0.0"} {
		if strings.Contains(conf, unwanted) {
			t.Errorf("received Configuration keeps %q:\n%s", unwanted, conf)
		}
	}
	if !strings.Contains(conf, "namespace: liqo-tenant-cluster-b") {
		t.Errorf("received Configuration not moved to the bundle's namespace:\n%s", conf)
	}
	gw := got["gatewayclient.yaml"]
	for _, want := range []string{"- 172.18.0.3", "port: 30851", "mtu: 1400", "name: custom-client"} {
		if !strings.Contains(gw, want) {
			t.Errorf("gatewayclient.yaml lacks %q:\n%s", want, gw)
		}
	}
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, "spec.mtu changed from 1340 to the server's 1400") || !strings.Contains(notes, "endpoint set to 172.18.0.3 port 30851") {
		t.Errorf("notes do not report the endpoint and the MTU change:\n%s", notes)
	}
	if !strings.HasSuffix(string(res.Kustomization), "- namespace.yaml\n- gatewayclient.yaml\n- configuration.yaml\n- publickey.yaml\n") ||
		!strings.HasPrefix(string(res.Kustomization), "# A peerlink peer bundle") {
		t.Errorf("unexpected kustomization:\n%s", res.Kustomization)
	}

	// Adding the same file again to the result changes nothing.
	var again []ManifestFile
	for _, f := range files {
		if f.Name != "gatewayclient.yaml" {
			again = append(again, f)
		}
	}
	_, written := parseBundleFiles(t, res.Files)
	again = append(again, written...)
	res2, err := AddToBundle(res.Kustomization, again, mustParse(t, fromServer), rangepolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if string(res2.Kustomization) != string(res.Kustomization) {
		t.Errorf("kustomization changed on the second add:\n%s", res2.Kustomization)
	}
	for _, f := range res2.Files {
		if got[f.Name] != string(f.Data) {
			t.Errorf("%s changed on the second add:\n%s", f.Name, f.Data)
		}
	}
}

// TestAddToBundleDualStack: a peer's IPv6 ranges beside its IPv4 ones are
// accepted as the controller accepts them: ULA by default, a global
// unicast range with an allowlist entry.
func TestAddToBundleDualStack(t *testing.T) {
	dual := strings.Replace(strings.Replace(readFromServer(t),
		"pod: [10.244.0.0/24]", `pod: [10.244.0.0/24, "fd44:2::/48"]`, 1),
		"external: [10.70.0.0/16]", `external: [10.70.0.0/16, "2a01:4f8:1::/48"]`, 1)
	policy := rangepolicy.Policy{Allowed: cidr.MustPrefixes("10.0.0.0/8", "fd00::/8", "2a01:4f8::/32")}
	k, files := initClientBundle(t)
	res, err := AddToBundle(k, files, mustParse(t, dual), policy)
	if err != nil {
		t.Fatal(err)
	}
	var conf string
	for _, f := range res.Files {
		if f.Name == "configuration.yaml" {
			conf = string(f.Data)
		}
	}
	for _, want := range []string{"fd44:2::/48", "2a01:4f8:1::/48", "10.244.0.0/24"} {
		if !strings.Contains(conf, want) {
			t.Errorf("configuration.yaml lacks %s:\n%s", want, conf)
		}
	}
	// Without the allowlist entry, the global unicast range is refused.
	k, files = initClientBundle(t)
	if _, err := AddToBundle(k, files, mustParse(t, dual), rangepolicy.Policy{}); err == nil || !strings.Contains(err.Error(), "spec.remote.cidr.external[1]: 2a01:4f8:1::/48 refused (NotAllowed)") {
		t.Errorf("AddToBundle with the default allowlist = %v, want the global unicast range refused", err)
	}
}

func TestAddToBundleRefuses(t *testing.T) {
	fromServer := readFromServer(t)
	server, err := manifests.GatewayServer(manifests.GatewayServerOptions{Peer: manifests.Peer{RemoteClusterID: "cluster-b"}, ServiceType: "NodePort", Port: 51840, MTU: 1340})
	if err != nil {
		t.Fatal(err)
	}
	serverFiles, err := InitBundle(server)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		server   bool
		received string
		want     string
		more     []string
	}{
		{"a GatewayClient into a server bundle", true, fromServer, "document 3 (GatewayClient cluster-b): this bundle is the server side", nil},
		{"another peer", false, strings.ReplaceAll(fromServer, "liqo.io/remote-cluster-id: cluster-b", "liqo.io/remote-cluster-id: cluster-c"),
			`is "cluster-c" but this bundle is for peer "cluster-b"`, nil},
		{"a Secret", false, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: gw-x\ndata:\n  privateKey: AAAA\n", "not Secret", nil},
		// Which hosts outside its pods a cluster remaps is its admin's
		// choice alone.
		{"an IP", false, "apiVersion: ipam.liqo.io/v1alpha1\nkind: IP\nmetadata:\n  name: x\nspec:\n  ip: 192.168.1.1\n", "not IP", nil},
		{"a GatewayServer", false, "apiVersion: networking.liqo.io/v1beta1\nkind: GatewayServer\nmetadata:\n  name: x\n  labels:\n    liqo.io/remote-cluster-id: cluster-b\n", "not GatewayServer", nil},
		{"an unknown field", false, strings.Replace(fromServer, "  mtu: 1400", "  mtuu: 1400", 1), `unknown field "spec.mtuu"`, nil},
		{"a short key", false, strings.Replace(fromServer, "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "AAAA", 1), "spec.publicKey", nil},
		{"an all-zero key", false, strings.Replace(fromServer, "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 1),
			"document 2 (PublicKey cluster-b): spec.publicKey: Invalid value", []string{"public key is all zero"}},
		{"a key not in canonical form", false, strings.Replace(fromServer, "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwd=", 1),
			"document 2 (PublicKey cluster-b): spec.publicKey: Invalid value", []string{"is not in canonical form"}},
		{"an MTU of 0", false, strings.Replace(fromServer, "  mtu: 1400", "  mtu: 0", 1), "document 3 (GatewayClient cluster-b): spec.mtu: 0 is not an MTU", nil},
		{"a second Configuration", false, fromServer + "---\n" + strings.SplitN(fromServer, "---\n", 2)[0],
			"document 4 (Configuration cluster-b): a second Configuration after document 1 (Configuration cluster-b)", nil},
		{"a second PublicKey", false, fromServer + "---\n" + strings.SplitN(fromServer, "---\n", 3)[1],
			"document 4 (PublicKey cluster-b): a second PublicKey after document 2", nil},
		{"a second GatewayClient", false, fromServer + "---\n" + strings.SplitN(fromServer, "---\n", 3)[2],
			"document 4 (GatewayClient cluster-b): a second GatewayClient after document 3", nil},
		{"a link-local range", false, strings.Replace(fromServer, "external: [10.70.0.0/16]", "external: [169.254.0.0/16]", 1),
			"document 1 (Configuration cluster-b):", []string{"spec.remote.cidr.external[0]", "169.254.0.0/16 refused (SpecialUse)"}},
		{"a loopback range", false, strings.Replace(fromServer, "pod: [10.244.0.0/24]", "pod: [127.0.0.0/8]", 1), "spec.remote.cidr.pod[0]", []string{"refused (SpecialUse)"}},
		{"a multicast range", false, strings.Replace(fromServer, "pod: [10.244.0.0/24]", "pod: [224.0.0.0/4]", 1), "spec.remote.cidr.pod[0]", []string{"refused (SpecialUse)"}},
		{"a default route", false, strings.Replace(fromServer, "pod: [10.244.0.0/24]", "pod: [0.0.0.0/0]", 1), "spec.remote.cidr.pod[0]", []string{"refused (SpecialUse)"}},
		{"a public range", false, strings.Replace(fromServer, "external: [10.70.0.0/16]", "external: [8.8.8.0/24]", 1),
			"document 1 (Configuration cluster-b): spec.remote.cidr.external[0]: 8.8.8.0/24 refused (NotAllowed)", nil},
		{"a CIDR with a trailing space", false, strings.Replace(fromServer, "pod: [10.244.0.0/24]", `pod: ["10.244.0.0/24 "]`, 1),
			"document 1 (Configuration cluster-b):", []string{`spec.remote.cidr.pod[0]: Invalid value: "10.244.0.0/24 "`}},
		{"a CIDR with a leading tab", false, strings.Replace(fromServer, "external: [10.70.0.0/16]", `external: ["\t10.70.0.0/16"]`, 1),
			"document 1 (Configuration cluster-b):", []string{"spec.remote.cidr.external[0]: Invalid value"}},
		{"a key with a line break", false, strings.Replace(fromServer, "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", `"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n"`, 1),
			"document 2 (PublicKey cluster-b): spec.publicKey: Invalid value", nil},
		{"a key with a space", false, strings.Replace(fromServer, "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", `" BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="`, 1),
			"document 2 (PublicKey cluster-b): spec.publicKey: Invalid value", nil},
		{"a next key not in canonical form", false, strings.Replace(fromServer, "  publicKey: BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "  publicKey: BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n  nextPublicKey: CAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAh=", 1),
			"document 2 (PublicKey cluster-b): spec.nextPublicKey: Invalid value", []string{"not in canonical form"}},
		{"an all-zero next key", false, strings.Replace(fromServer, "  publicKey: BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "  publicKey: BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n  nextPublicKey: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", 1),
			"document 2 (PublicKey cluster-b): spec.nextPublicKey: Invalid value", []string{"all zero"}},
		{"68,000 ranges", false, strings.Replace(fromServer, "external: [10.70.0.0/16]", "external: ["+manyRanges(68000)+"]", 1),
			"document 1 (Configuration cluster-b): spec.remote.cidr.external: Too many: 68000: must have at most 64 items", nil},
		{"a loopback name", false, strings.Replace(fromServer, "addresses: [172.18.0.3]", "addresses: [gw.localhost]", 1),
			"document 3 (GatewayClient cluster-b): spec.endpoint.addresses[0]: Invalid value: \"gw.localhost\"", nil},
		{"an address in hexadecimal", false, strings.Replace(fromServer, "addresses: [172.18.0.3]", `addresses: ["0x7f000001"]`, 1),
			"document 3 (GatewayClient cluster-b): spec.endpoint.addresses[0]", []string{"dotted decimal"}},
		{"a metadata address by wildcard DNS", false, strings.Replace(fromServer, "addresses: [172.18.0.3]", "addresses: [169.254.169.254.nip.io]", 1),
			"document 3 (GatewayClient cluster-b): spec.endpoint.addresses[0]", []string{"link-local"}},
		{"17 addresses", false, strings.Replace(fromServer, "addresses: [172.18.0.3]", "addresses: ["+strings.TrimSuffix(strings.Repeat("172.18.0.3, ", 17), ", ")+"]", 1),
			"document 3 (GatewayClient cluster-b): spec.endpoint.addresses: Too many: 17", nil},
		{"an IPv6 link-local range", false, strings.Replace(fromServer, "external: [10.70.0.0/16]", "external: [\"fe80::/64\"]", 1), "spec.remote.cidr.external[0]", []string{"refused (SpecialUse): is in fe80::/10 (link-local)"}},
		{"an IPv6 multicast range", false, strings.Replace(fromServer, "pod: [10.244.0.0/24]", "pod: [10.244.0.0/24, \"ff02::/16\"]", 1), "spec.remote.cidr.pod[1]", []string{"refused (SpecialUse)"}},
		{"an IPv6 global unicast range", false, strings.Replace(fromServer, "external: [10.70.0.0/16]", "external: [\"2a01:4f8::/32\"]", 1), "spec.remote.cidr.external[0]", []string{"refused (NotAllowed)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, files := initClientBundle(t)
			if tt.server {
				k, files = parseBundleFiles(t, serverFiles)
			}
			_, err := AddToBundle(k, files, mustParse(t, tt.received), rangepolicy.Policy{})
			for _, want := range append([]string{tt.want}, tt.more...) {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("want an error containing %q, got %v", want, err)
				}
			}
		})
	}
}

// manyRanges is n distinct /32s in 10.0.0.0/8, comma-separated.
func manyRanges(n int) string {
	rs := make([]string, n)
	for i := range rs {
		rs[i] = fmt.Sprintf("10.%d.%d.%d/32", 100+i>>16, i>>8&255, i&255)
	}
	return strings.Join(rs, ", ")
}

func TestAddResourcesKeepsComments(t *testing.T) {
	in := "# mine\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- a.yaml # first\nnamePrefix: x-\n"
	out, err := AddResources([]byte(in), "a.yaml", "b.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := "# mine\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- a.yaml # first\n- b.yaml\nnamePrefix: x-\n"
	if string(out) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
}
