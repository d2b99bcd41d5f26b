package peerbundle

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// FuzzLint lints a bundle whose one manifest holds arbitrary bytes: lint
// never panics, and it reports every problem as a finding naming a file.
func FuzzLint(f *testing.F) {
	for _, name := range []string{"configuration.yaml", "publickey.yaml", "gatewayclient.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "bundles", "bad", "two-gateways", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("apiVersion: v1\nkind: Secret\nmetadata: {name: x, namespace: y}\ndata: {privateKey: AAAA}\n"))
	f.Fuzz(func(t *testing.T, manifest []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources:\n- objects.yaml\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), manifest, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, f := range Lint(dir, rangepolicy.Policy{}) {
			if f.File == "" || f.Msg == "" {
				t.Fatalf("finding without a file or a message: %+v", f)
			}
		}
	})
}
