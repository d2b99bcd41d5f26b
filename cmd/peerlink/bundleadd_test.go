package main

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

// peerFile is what a server's bundle export sends a client, with the
// changes a hostile peer might make.
func peerFile(mutate func(string) string) string {
	s := `apiVersion: networking.liqo.io/v1beta1
kind: Configuration
metadata:
  name: b
  labels:
    liqo.io/remote-cluster-id: b
  annotations:
    config.kubernetes.io/local-config: "true"
    argocd.argoproj.io/hook: PreSync
spec:
  remote:
    cidr:
      pod: ["10.244.0.0/16"]
      external: ["10.70.0.0/16"]
---
apiVersion: networking.liqo.io/v1beta1
kind: PublicKey
metadata:
  name: b
  labels:
    liqo.io/remote-cluster-id: b
    networking.liqo.io/gateway-resource: "true"
    team: theirs
spec:
  publicKey: BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=
---
apiVersion: networking.liqo.io/v1beta1
kind: GatewayClient
metadata:
  name: b
  labels:
    liqo.io/remote-cluster-id: b
spec:
  mtu: 1340
  endpoint:
    addresses: ["192.0.2.10"]
    port: 30851
    protocol: UDP
`
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
	if _, stderr, code := runCLI(t, "bundle", "init", dir, "--peer", "b", "--role", "client"); code != 0 {
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
		{"link-local", peerFile(replace(`external: ["10.70.0.0/16"]`, `external: ["169.254.0.0/16"]`)), nil,
			"document 1 (Configuration b): spec.remote.cidr.external[0]: Invalid value: \"169.254.0.0/16\""},
		{"metadata address", peerFile(replace(`pod: ["10.244.0.0/16"]`, `pod: ["169.254.169.254/32"]`)), nil, "spec.remote.cidr.pod[0]"},
		{"loopback", peerFile(replace(`pod: ["10.244.0.0/16"]`, `pod: ["127.0.0.0/8"]`)), nil, "127.0.0.0/8 refused (SpecialUse)"},
		{"multicast", peerFile(replace(`external: ["10.70.0.0/16"]`, `external: ["224.0.0.0/4"]`)), nil, "224.0.0.0/4 refused (SpecialUse)"},
		{"reserved", peerFile(replace(`external: ["10.70.0.0/16"]`, `external: ["240.0.0.0/4"]`)), nil, "240.0.0.0/4 refused (SpecialUse)"},
		{"default route", peerFile(replace(`pod: ["10.244.0.0/16"]`, `pod: ["0.0.0.0/0"]`)), nil, "0.0.0.0/0 refused (SpecialUse)"},
		{"public range", peerFile(replace(`external: ["10.70.0.0/16"]`, `external: ["8.8.8.0/24"]`)), nil,
			"document 1 (Configuration b): spec.remote.cidr.external[0]: 8.8.8.0/24 refused (NotAllowed)"},
		{"outside a narrow allowlist", peerFile(nil), []string{"--allowed-peer-cidr", "10.244.0.0/16"},
			"spec.remote.cidr.external[0]: 10.70.0.0/16 refused (NotAllowed): outside the allowed peer ranges 10.244.0.0/16"},
		{"IPv6", peerFile(replace(`external: ["10.70.0.0/16"]`, `external: ["fd00::/64"]`)), nil, "spec.remote.cidr.external[0]"},
		{"two Configurations", peerFile(second(0)), nil, "document 4 (Configuration b): a second Configuration"},
		{"two PublicKeys", peerFile(second(1)), nil, "document 4 (PublicKey b): a second PublicKey"},
		{"two GatewayClients", peerFile(second(2)), nil, "document 4 (GatewayClient b): a second GatewayClient"},
		{"all-zero key", peerFile(replace("BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")), nil,
			"document 2 (PublicKey b): spec.publicKey: public key is all zero"},
		{"non-canonical key", peerFile(replace("BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwd=")), nil,
			"document 2 (PublicKey b): spec.publicKey: public key \"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwd=\" is not in canonical form"},
		{"MTU 0", peerFile(replace("mtu: 1340", "mtu: 0")), nil, "document 3 (GatewayClient b): spec.mtu: 0 is not an MTU"},
		{"too large", peerFile(nil) + "# " + strings.Repeat("x", 1<<20) + "\n", nil, "larger than 1048576 bytes"},
		{"bad allowlist", peerFile(nil), []string{"--allowed-peer-cidr", "0.0.0.0/0"}, "--allowed-peer-cidr: allowed range 0 (0.0.0.0/0)"},
		{"another peer", peerFile(func(s string) string { return strings.ReplaceAll(s, "remote-cluster-id: b", "remote-cluster-id: c") }), nil,
			`is "c" but this bundle is for peer "b"`},
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
	if err := os.WriteFile(path, []byte(peerFile(nil)), 0o644); err != nil {
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
