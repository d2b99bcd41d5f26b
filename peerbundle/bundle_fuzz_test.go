package peerbundle

import (
	"strings"
	"testing"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/generators"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// FuzzAddToBundle feeds AddToBundle arbitrary files as a peer could send
// them. It never panics, and what it accepts holds at most one object of
// each kind, only ranges the policy accepts, and no annotation.
func FuzzAddToBundle(f *testing.F) {
	fromServer := readFromServer(f)
	f.Add(fromServer)
	f.Add(strings.Replace(fromServer, "external: [10.70.0.0/16]", "external: [169.254.0.0/16]", 1))
	f.Add(fromServer + "---\n" + strings.SplitN(fromServer, "---\n", 2)[0])
	f.Add("apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n")
	f.Fuzz(func(t *testing.T, file string) {
		received, err := generators.ParseManifests([]byte(file))
		if err != nil || len(received) == 0 {
			return
		}
		k, files := initClientBundle(t)
		res, err := AddToBundle(k, files, received, rangepolicy.Policy{})
		if err != nil {
			return
		}
		kinds := map[string]int{}
		for _, u := range received {
			kinds[u.GetKind()]++
		}
		for kind, n := range kinds {
			if n > 1 {
				t.Fatalf("accepted %d objects of kind %s", n, kind)
			}
		}
		for _, out := range res.Files {
			objs, err := generators.ParseManifests(out.Data)
			if err != nil {
				t.Fatalf("%s does not parse: %v", out.Name, err)
			}
			for _, u := range objs {
				if len(u.GetAnnotations()) > 0 {
					t.Fatalf("%s keeps annotations %v", out.Name, u.GetAnnotations())
				}
				if u.GetKind() != generators.KindConfiguration {
					continue
				}
				obj, _, err := generators.DecodeStrict(u)
				if err != nil {
					t.Fatalf("%s: %v", out.Name, err)
				}
				if err := CheckPeerRanges(obj.(*netv1beta1.Configuration), rangepolicy.Policy{}); err != nil {
					t.Fatalf("%s holds a refused range: %v", out.Name, err)
				}
			}
		}
	})
}
