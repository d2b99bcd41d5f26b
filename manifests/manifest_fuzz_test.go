package manifests

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseManifests feeds arbitrary bytes to the manifest reader that
// `bundle add`, `lint` and `render` use on files sent by a peer, and decodes
// every peering object found. It must return an error or objects, never
// panic, and whatever it decodes must encode again.
func FuzzParseManifests(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "testdata", "api", "*", "*.yaml"))
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: networking.liqo.io/v1beta1\n  kind: PublicKey\n"))
	f.Add([]byte("---\n---\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := ParseManifests(data)
		if err != nil {
			return
		}
		for _, u := range objs {
			if !IsPeeringKind(u) {
				continue
			}
			obj, _, err := DecodeStrict(u)
			if err != nil {
				continue
			}
			if _, err := Marshal(FormatYAML, obj); err != nil {
				t.Fatalf("decoded %s %q but cannot encode it again: %v", u.GetKind(), u.GetName(), err)
			}
		}
	})
}
