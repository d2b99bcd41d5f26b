package templates

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// FuzzRender renders arbitrary YAML documents as template objects, against
// a GatewayServer with both set and unset pointers and a GatewayClient. It
// checks that Render never panics, and that what it returns is a valid
// unstructured object of the declared kind and name, without optional
// markers, rendered the same way twice.
func FuzzRender(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(goldenDir, "*", "template.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	seeds = append(seeds, serverFile, clientFile)
	for _, path := range seeds {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}

	server := &netv1beta1.GatewayServer{ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: "ns"}}
	server.Spec.Default()
	pinned := server.DeepCopy()
	pinned.Spec.Endpoint.NodePort = ptr.To[int32](30840)
	pinned.Spec.Endpoint.LoadBalancerIP = ptr.To("192.0.2.1")
	client := &netv1beta1.GatewayClient{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "ns"}}
	client.Spec.Endpoint.Addresses = []string{"192.0.2.2", "gw.example.com"}
	client.Spec.Default()
	datas := []Data{
		DataForServer(server, "uid", "cluster-b", "gw-server"),
		DataForServer(pinned, "uid", "cluster-b", "keys"),
		DataForClient(client, "uid", "cluster-a", "gw-client"),
	}

	f.Fuzz(func(t *testing.T, doc []byte) {
		obj, err := decodeYAML(doc)
		if err != nil || obj == nil {
			return
		}
		tmpl := &unstructured.Unstructured{Object: obj}
		for _, data := range datas {
			out, err := Render(tmpl, data)
			if err != nil {
				if err.Error() == "" {
					t.Fatal("empty error message")
				}
				continue
			}
			checkRendered(t, tmpl, data, out)
			again, err := Render(tmpl, data)
			if err != nil {
				t.Fatalf("second render failed: %v", err)
			}
			if diff := cmp.Diff(out.Object, again.Object); diff != "" {
				t.Fatalf("two renders differ:\n%s", diff)
			}
		}
	})
}

func checkRendered(t *testing.T, tmpl *unstructured.Unstructured, data Data, out *unstructured.Unstructured) {
	t.Helper()
	// DeepCopyJSONValue panics on any value an unstructured object may not hold.
	runtime.DeepCopyJSONValue(out.Object)
	if _, err := json.Marshal(out.Object); err != nil {
		t.Fatalf("rendered object does not marshal: %v", err)
	}
	kind, err := objectKind(tmpl.Object["spec"].(map[string]any))
	if err != nil {
		t.Fatalf("rendered although spec.objectKind is bad: %v", err)
	}
	if out.GetAPIVersion() != kind.APIVersion || out.GetKind() != kind.Kind {
		t.Fatalf("rendered %s %s, want %s %s", out.GetAPIVersion(), out.GetKind(), kind.APIVersion, kind.Kind)
	}
	if out.GetName() != data.Name || out.GetNamespace() != data.Namespace {
		t.Fatalf("rendered %s/%s, want %s/%s", out.GetNamespace(), out.GetName(), data.Namespace, data.Name)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if strings.HasPrefix(k, optionalPrefix) {
					t.Fatalf("%s: optional marker left in key %q", path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		}
	}
	walk("", out.Object)
	for _, field := range []string{"labels", "annotations"} {
		m, _ := out.Object["metadata"].(map[string]any)[field].(map[string]any)
		for k, v := range m {
			if _, ok := v.(string); !ok && v != nil {
				t.Fatalf("metadata.%s[%q] is %T, not a string", field, k, v)
			}
		}
	}
}
