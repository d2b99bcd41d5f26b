package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// publicBundle writes a client bundle for peer cluster-b whose
// Configuration declares an external range outside the default
// allowlist, 8.8.8.0/24, as create prints it when allowed to.
func publicBundle(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "peer-cluster-b")
	if _, stderr, code := runCLI(t, "bundle", "init", dir, "--peer", "cluster-b", "--role", "client", "--addresses", "172.18.0.3", "--port", "30851"); code != 0 {
		t.Fatalf("bundle init: %s", stderr)
	}
	conf, stderr, code := runCLI(t, "create", "configuration", "--remote-cluster-id", "cluster-b", "--pod-cidr", "10.244.0.0/24",
		"--external-cidr", "8.8.8.0/24", "--allowed-peer-cidr", "10.0.0.0/8,8.8.8.0/24", "-o", "yaml")
	if code != 0 {
		t.Fatalf("create configuration with the range allowed: %s", stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "configuration.yaml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), append(k, "- configuration.yaml\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPeerRangeAllowlist holds create, lint and render to the allowlist
// of peer ranges that bundle add and the controller apply, taken from
// --allowed-peer-cidr, and render from both forms of --cluster-info.
func TestPeerRangeAllowlist(t *testing.T) {
	_, stderr, code := runCLI(t, "create", "configuration", "--remote-cluster-id", "cluster-b", "--pod-cidr", "10.244.0.0/24", "--external-cidr", "8.8.8.0/24", "-o", "yaml")
	if code != 1 || !strings.Contains(stderr, "--external-cidr: 8.8.8.0/24 refused (NotAllowed)") {
		t.Errorf("create configuration of a public range: exit %d, %s", code, stderr)
	}
	_, stderr, code = runCLI(t, "create", "configuration", "--remote-cluster-id", "cluster-b", "--pod-cidr", "127.0.0.0/8", "--allowed-peer-cidr", "0.0.0.0/1", "-o", "yaml")
	if code != 1 || !strings.Contains(stderr, "--allowed-peer-cidr") {
		t.Errorf("create configuration with an allowlist holding loopback: exit %d, %s", code, stderr)
	}

	dir := publicBundle(t)
	stdout, _, code := runCLI(t, "lint", dir)
	if code != 1 || !strings.Contains(stdout, "configuration.yaml: Configuration liqo-tenant-cluster-b/cluster-b: spec.remote.cidr.external[0]: 8.8.8.0/24 refused (NotAllowed)") {
		t.Errorf("lint of a public range: exit %d, %s", code, stdout)
	}
	if stdout, _, code := runCLI(t, "lint", dir, "--allowed-peer-cidr", "10.0.0.0/8", "--allowed-peer-cidr", "8.8.8.0/24"); code != 0 || stdout != "no findings\n" {
		t.Errorf("lint with the range allowed: exit %d, %s", code, stdout)
	}

	// The two forms of cluster info, with and without the allowlist.
	infoDir := t.TempDir()
	forms := map[string]string{
		"info":               "clusterID: cluster-a\nnetwork:\n  podCIDRs: [10.245.0.0/24]\n  allowedPeerCIDRs: [10.0.0.0/8, 8.8.8.0/24]\npeers: []\n",
		"configmap":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: peerlink-cluster-info\ndata:\n  clusterID: cluster-a\n  podCIDRs: 10.245.0.0/24\n  allowedPeerCIDRs: 10.0.0.0/8,8.8.8.0/24\n",
		"info, default":      "clusterID: cluster-a\nnetwork:\n  podCIDRs: [10.245.0.0/24]\npeers: []\n",
		"configmap, default": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: peerlink-cluster-info\ndata:\n  clusterID: cluster-a\n  podCIDRs: 10.245.0.0/24\n",
	}
	for name, info := range forms {
		path := filepath.Join(infoDir, strings.NewReplacer(",", "", " ", "-").Replace(name)+".yaml")
		if err := os.WriteFile(path, []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runCLI(t, "render", dir, "--cluster-info", path)
		if strings.HasSuffix(name, "default") {
			if code != 1 || !strings.Contains(stderr, "spec.remote.cidr.external[0]: 8.8.8.0/24 refused (NotAllowed)") {
				t.Errorf("render with %s cluster info: exit %d, %s", name, code, stderr)
			}
			continue
		}
		if code != 0 || !strings.Contains(stdout, "- 8.8.8.0/24") {
			t.Errorf("render with %s cluster info holding the range: exit %d, %s%s", name, code, stdout, stderr)
		}
	}
}

// TestLintPeerBundleFetchesNothing lints with --peer-bundle a peer bundle
// that lists a remote resource: lint reports it, naming the file and the
// entry, and nothing is fetched.
func TestLintPeerBundleFetchesNothing(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"))
	}))
	defer srv.Close()
	local := filepath.Join(repoRoot, "bundles", "examples", "cluster-a", "peer-cluster-b")
	peer := t.TempDir()
	src := filepath.Join(repoRoot, "bundles", "examples", "cluster-b", "peer-cluster-a")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "kustomization.yaml" {
			data = append(data, "- "+srv.URL+"/extra.yaml\n"...)
		}
		if err := os.WriteFile(filepath.Join(peer, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stdout, _, code := runCLI(t, "lint", local, "--peer-bundle", peer)
	if code != 1 || !strings.Contains(stdout, filepath.Join(peer, "kustomization.yaml")+`: resources[`) || !strings.Contains(stdout, srv.URL+"/extra.yaml") {
		t.Errorf("exit %d, stdout:\n%s", code, stdout)
	}
	for _, args := range [][]string{{"render", peer}} {
		if _, stderr, code := runCLI(t, args...); code != 1 || !strings.Contains(stderr, "fetches nothing") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests, want none", n)
	}
}

// TestPeerRangePlan: render keeps a peer's range as it is only inside the
// address plan of --cluster-info (routedPeerCIDRs, in both forms) and
// remaps it otherwise, as the controller does; bundle add reports where
// each of the peer's ranges goes under --routed-peer-cidr.
func TestPeerRangePlan(t *testing.T) {
	dir := publicBundle(t)
	infoDir := t.TempDir()
	for name, info := range map[string]string{
		"info":             "clusterID: cluster-a\nnetwork:\n  podCIDRs: [10.245.0.0/24]\n  allowedPeerCIDRs: [10.0.0.0/8, 8.8.8.0/24]\n  routedPeerCIDRs: [10.244.0.0/16]\npeers: []\n",
		"configmap":        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: peerlink-cluster-info\ndata:\n  clusterID: cluster-a\n  podCIDRs: 10.245.0.0/24\n  allowedPeerCIDRs: 10.0.0.0/8,8.8.8.0/24\n  routedPeerCIDRs: 10.244.0.0/16\n",
		"info-noplan":      "clusterID: cluster-a\nnetwork:\n  podCIDRs: [10.245.0.0/24]\n  allowedPeerCIDRs: [10.0.0.0/8, 8.8.8.0/24]\npeers: []\n",
		"configmap-noplan": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: peerlink-cluster-info\ndata:\n  clusterID: cluster-a\n  podCIDRs: 10.245.0.0/24\n  allowedPeerCIDRs: 10.0.0.0/8,8.8.8.0/24\n  routedPeerCIDRs: \"\"\n",
	} {
		path := filepath.Join(infoDir, name+".yaml")
		if err := os.WriteFile(path, []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runCLI(t, "render", dir, "--cluster-info", path)
		if code != 0 {
			t.Fatalf("render with %s: exit %d, %s", name, code, stderr)
		}
		status := stdout[strings.LastIndex(stdout, "status:"):]
		// The pod range lies in the plan, the external one does not.
		want := "external:\n      - 10.0.0.0/24\n      pod:\n      - 10.244.0.0/24"
		if strings.HasSuffix(name, "noplan") {
			want = "external:\n      - 10.0.1.0/24\n      pod:\n      - 10.0.0.0/24"
		}
		if !strings.Contains(status, want) {
			t.Errorf("render with %s: status\n%s\nwant it to hold\n%s", name, status, want)
		}
	}

	peer := filepath.Join(t.TempDir(), "from-cluster-b.yaml")
	conf, stderr, code := runCLI(t, "create", "configuration", "--remote-cluster-id", "cluster-b", "--pod-cidr", "10.244.0.0/24",
		"--external-cidr", "172.31.0.0/16", "-o", "yaml")
	if code != 0 {
		t.Fatalf("create configuration: %s", stderr)
	}
	if err := os.WriteFile(peer, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "bundle", "add", dir, peer, "--routed-peer-cidr", "10.244.0.0/16,172.16.0.0/12")
	if code != 0 {
		t.Fatalf("bundle add: exit %d, %s", code, stderr)
	}
	for _, want := range []string{
		"peer range spec.remote.cidr.pod[0] 10.244.0.0/24: routed as it is (in plan 10.244.0.0/16)",
		// It holds AWS's resolver: remapped, plan or not.
		"peer range spec.remote.cidr.external[0] 172.31.0.0/16: remapped",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("bundle add printed\n%s\nwant it to say %q", stdout, want)
		}
	}
	if _, stderr, code := runCLI(t, "bundle", "add", dir, peer, "--routed-peer-cidr", "169.254.0.0/16"); code != 1 || !strings.Contains(stderr, "--routed-peer-cidr: routed range 0 (169.254.0.0/16)") {
		t.Errorf("bundle add with a special-use plan: exit %d, %s", code, stderr)
	}
}
