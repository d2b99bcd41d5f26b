package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// peerFile is what a server's bundle export sends the client cluster-a, with
// the changes a hostile peer might make.
func peerFile(t *testing.T, mutate func(string) string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "bundles", "add", "from-server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if mutate != nil {
		s = mutate(s)
	}
	return s
}

// digest hashes the names and contents of the files under dir.
func digest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestBundleAddRefusesHostileFiles hands bundle add what a hostile peer
// could send: each is refused with one line naming the object and field,
// and the bundle is left as it was.
func TestBundleAddRefusesHostileFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	if _, stderr, code := runCLI(t, "bundle", "init", dir, "--peer", "cluster-b", "--role", "client"); code != 0 {
		t.Fatalf("bundle init: %s", stderr)
	}
	before := digest(t, dir)
	replace := func(old, new string) func(string) string {
		return func(s string) string { return strings.Replace(s, old, new, 1) }
	}
	second := func(i int) func(string) string {
		return func(s string) string { return s + "---\n" + strings.Split(s, "---\n")[i] }
	}
	for _, tc := range []struct {
		name string
		file string
		args []string
		want string
	}{
		{"link-local", peerFile(t, replace(`external: [10.70.0.0/16]`, `external: [169.254.0.0/16]`)), nil,
			"document 1 (Configuration cluster-b): spec.remote.cidr.external[0]: Invalid value: \"169.254.0.0/16\""},
		{"metadata address", peerFile(t, replace(`pod: [10.244.0.0/24]`, `pod: [169.254.169.254/32]`)), nil, "spec.remote.cidr.pod[0]"},
		{"loopback", peerFile(t, replace(`pod: [10.244.0.0/24]`, `pod: [127.0.0.0/8]`)), nil, "127.0.0.0/8 refused (SpecialUse)"},
		{"multicast", peerFile(t, replace(`external: [10.70.0.0/16]`, `external: [224.0.0.0/4]`)), nil, "224.0.0.0/4 refused (SpecialUse)"},
		{"reserved", peerFile(t, replace(`external: [10.70.0.0/16]`, `external: [240.0.0.0/4]`)), nil, "240.0.0.0/4 refused (SpecialUse)"},
		{"default route", peerFile(t, replace(`pod: [10.244.0.0/24]`, `pod: [0.0.0.0/0]`)), nil, "0.0.0.0/0 refused (SpecialUse)"},
		{"public range", peerFile(t, replace(`external: [10.70.0.0/16]`, `external: [8.8.8.0/24]`)), nil,
			"document 1 (Configuration cluster-b): spec.remote.cidr.external[0]: 8.8.8.0/24 refused (NotAllowed)"},
		{"outside a narrow allowlist", peerFile(t, nil), []string{"--allowed-peer-cidr", "10.244.0.0/16"},
			"spec.remote.cidr.external[0]: 10.70.0.0/16 refused (NotAllowed): outside the allowed peer ranges 10.244.0.0/16"},
		{"IPv6 link-local", peerFile(t, replace(`external: [10.70.0.0/16]`, `external: ["fe80::/64"]`)), nil,
			`document 1 (Configuration cluster-b): spec.remote.cidr.external[0]: Invalid value: "fe80::/64": fe80::/64 refused (SpecialUse): is in fe80::/10 (link-local)`},
		{"IPv6 NAT64", peerFile(t, replace(`pod: [10.244.0.0/24]`, `pod: [10.244.0.0/24, "64:ff9b::/96"]`)), nil, "64:ff9b::/96 refused (SpecialUse): is in 64:ff9b::/96 (NAT64"},
		{"IPv6 global unicast", peerFile(t, replace(`external: [10.70.0.0/16]`, `external: ["2a01:4f8::/32"]`)), nil,
			"spec.remote.cidr.external[0]: 2a01:4f8::/32 refused (NotAllowed)"},
		{"two Configurations", peerFile(t, second(0)), nil, "document 4 (Configuration cluster-b): a second Configuration"},
		{"two PublicKeys", peerFile(t, second(1)), nil, "document 4 (PublicKey cluster-b): a second PublicKey"},
		{"two GatewayClients", peerFile(t, second(2)), nil, "document 4 (GatewayClient cluster-b): a second GatewayClient"},
		{"all-zero key", peerFile(t, replace("BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")), nil,
			"document 2 (PublicKey cluster-b): spec.publicKey: Invalid value: \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\": public key is all zero"},
		{"non-canonical key", peerFile(t, replace("BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwd=")), nil,
			"document 2 (PublicKey cluster-b): spec.publicKey: Invalid value: \"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwd=\": public key \"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwd=\" is not in canonical form"},
		{"MTU 0", peerFile(t, replace("mtu: 1400", "mtu: 0")), nil, "document 3 (GatewayClient cluster-b): spec.mtu: 0 is not an MTU"},
		{"too large", peerFile(t, nil) + "# " + strings.Repeat("x", 1<<20) + "\n", nil, "larger than 1048576 bytes"},
		{"bad allowlist", peerFile(t, nil), []string{"--allowed-peer-cidr", "0.0.0.0/0"}, "--allowed-peer-cidr: allowed range 0 (0.0.0.0/0)"},
		{"another peer", peerFile(t, func(s string) string {
			return strings.ReplaceAll(s, "remote-cluster-id: cluster-b", "remote-cluster-id: cluster-c")
		}), nil,
			`is "cluster-c" but this bundle is for peer "cluster-b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "from-b.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := runCLI(t, append([]string{"bundle", "add", dir, path}, tc.args...)...)
			if code != 1 || stdout != "" {
				t.Errorf("exit %d, stdout %q: want 1 and nothing", code, stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q: want one line containing %q", stderr, tc.want)
			}
			if digest(t, dir) != before {
				t.Errorf("the bundle changed")
			}
		})
	}

	// The file as it should be is taken, without the peer's annotations
	// and foreign labels, and leaves no temporary file behind.
	path := filepath.Join(t.TempDir(), "from-b.yaml")
	if err := os.WriteFile(path, []byte(peerFile(t, nil)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "bundle", "add", dir, path); code != 0 {
		t.Fatalf("bundle add: %s", stderr)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left in the bundle", e.Name())
		}
		for _, bad := range []string{"local-config", "argocd.argoproj.io", "team: theirs"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s keeps the peer's %q:\n%s", e.Name(), bad, b)
			}
		}
	}
}
