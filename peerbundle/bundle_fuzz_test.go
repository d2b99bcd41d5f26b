package peerbundle

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/manifests"
)

// FuzzAddToBundle feeds AddToBundle arbitrary files as a peer could send
// them, into a bundle made by bundle init and into a bare kustomization. It
// never panics, and what it accepts holds at most one object of each kind,
// only ranges the policy accepts, no annotation, no label but
// liqo.io/remote-cluster-id, everything in the tenant namespace of the
// peer, and a client whose template, key Secret, replicas and key rotation
// are this side's.
func FuzzAddToBundle(f *testing.F) {
	fromServer := readFromServer(f)
	f.Add(fromServer)
	f.Add(strings.Replace(fromServer, "external: [10.70.0.0/16]", "external: [169.254.0.0/16]", 1))
	f.Add(fromServer + "---\n" + strings.SplitN(fromServer, "---\n", 2)[0])
	f.Add("apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n")
	f.Add(hostileServer)
	f.Fuzz(func(t *testing.T, file string) {
		received, err := manifests.ParseManifests([]byte(file))
		if err != nil || len(received) == 0 {
			return
		}
		for _, bare := range []bool{false, true} {
			k, files := initClientBundle(t)
			if bare {
				k, files = []byte("resources: []\n"), nil
			}
			res, err := AddToBundle(k, files, received, rangepolicy.Policy{})
			if err != nil {
				continue
			}
			checkAdded(t, received, res)
		}
	})
}

// checkAdded checks what AddToBundle accepted of received.
func checkAdded(t *testing.T, received []*unstructured.Unstructured, res *AddResult) {
	t.Helper()
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
		objs, err := manifests.ParseManifests(out.Data)
		if err != nil {
			t.Fatalf("%s does not parse: %v", out.Name, err)
		}
		for _, u := range objs {
			if len(u.GetAnnotations()) > 0 {
				t.Fatalf("%s keeps annotations %v", out.Name, u.GetAnnotations())
			}
			if l := u.GetLabels(); len(l) != 1 || l[netv1beta1.RemoteClusterIDLabel] == "" {
				t.Fatalf("%s keeps labels %v", out.Name, l)
			}
			if ns := u.GetNamespace(); ns != manifests.TenantNamespace(u.GetLabels()[netv1beta1.RemoteClusterIDLabel]) {
				t.Fatalf("%s: %s %s in namespace %q", out.Name, u.GetKind(), u.GetName(), ns)
			}
			if u.GetKind() == manifests.KindGatewayClient {
				for _, field := range [][]string{{"spec", "secretRef"}, {"spec", "replicas"}, {"spec", "keyRotation"}, {"spec", "clientTemplateRef", "namespace"}} {
					if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, field...); found {
						t.Fatalf("%s: the GatewayClient has %v", out.Name, field)
					}
				}
			}
			if u.GetKind() != manifests.KindConfiguration {
				continue
			}
			obj, _, err := manifests.DecodeStrict(u)
			if err != nil {
				t.Fatalf("%s: %v", out.Name, err)
			}
			if err := CheckPeerRanges(obj.(*netv1beta1.Configuration), rangepolicy.Policy{}); err != nil {
				t.Fatalf("%s holds a refused range: %v", out.Name, err)
			}
		}
	}
}
