package templates

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/templates")

const goldenDir = "../testdata/templates"

// TestGolden renders each case under testdata/templates/<case>/: the
// gateway in gateway.yaml (with the CRD defaults applied, as the controller
// sees it) through template.yaml, or through the default template when the
// case has none. The result must equal expected.yaml, or the error
// error.txt.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(goldenDir, "*", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 20 {
		t.Fatalf("found %d golden cases, want at least 20", len(dirs))
	}
	for _, gwFile := range dirs {
		dir := filepath.Dir(gwFile)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			out, renderErr := renderCase(t, dir)
			expected := filepath.Join(dir, "expected.yaml")
			errFile := filepath.Join(dir, "error.txt")
			var got []byte
			want, stale := expected, errFile
			if renderErr != nil {
				got = []byte(renderErr.Error() + "\n")
				want, stale = errFile, expected
			} else {
				if got, err = yaml.Marshal(out.Object); err != nil {
					t.Fatal(err)
				}
				checkTyped(t, out)
			}
			if *update {
				if err := os.WriteFile(want, got, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(stale); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
				return
			}
			if _, err := os.Stat(stale); err == nil {
				t.Fatalf("rendering gave %s but the case has %s (run with -update if that is intended); got:\n%s", filepath.Base(want), filepath.Base(stale), got)
			}
			wantBytes, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v; got:\n%s", err, got)
			}
			if diff := cmp.Diff(string(wantBytes), string(got)); diff != "" {
				t.Errorf("%s differs (-want +got):\n%s", want, diff)
			}
		})
	}
}

// renderCase renders one golden case the way the controller does.
func renderCase(t *testing.T, dir string) (*unstructured.Unstructured, error) {
	t.Helper()
	gwBytes, err := os.ReadFile(filepath.Join(dir, "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var head struct{ Kind string }
	if err := yaml.Unmarshal(gwBytes, &head); err != nil {
		t.Fatal(err)
	}
	tmpl := caseTemplate(t, dir, head.Kind)
	switch head.Kind {
	case "GatewayServer":
		gw := decodeStrict[netv1beta1.GatewayServer](t, gwBytes)
		gw.Spec.Default()
		return RenderServer(tmpl, gw, DataForServer(gw, string(gw.UID), gw.Labels[netv1beta1.RemoteClusterIDLabel], KeySecretName(gw.Name, gw.Spec.SecretRef)))
	case "GatewayClient":
		gw := decodeStrict[netv1beta1.GatewayClient](t, gwBytes)
		gw.Spec.Default()
		return Render(tmpl, DataForClient(gw, string(gw.UID), gw.Labels[netv1beta1.RemoteClusterIDLabel], KeySecretName(gw.Name, gw.Spec.SecretRef)))
	}
	t.Fatalf("gateway.yaml: kind %q is not GatewayServer or GatewayClient", head.Kind)
	return nil, nil
}

// caseTemplate returns the case's template.yaml, else the default template
// for the gateway kind.
func caseTemplate(t *testing.T, dir, gatewayKind string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "template.yaml"))
	if err == nil {
		obj, err := decodeYAML(b)
		if err != nil {
			t.Fatalf("template.yaml: %v", err)
		}
		return &unstructured.Unstructured{Object: obj}
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	defaults, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	if gatewayKind == "GatewayClient" {
		return defaults[1]
	}
	return defaults[0]
}

// checkTyped decodes a rendered object of a kind the engine knows into its
// Go type, which fails when a number stayed a string or the reverse.
func checkTyped(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	var typed runtime.Object
	switch {
	case obj.GetAPIVersion() != netv1beta1.GroupVersion.String():
		return
	case obj.GetKind() == "WgGatewayServer":
		typed = &netv1beta1.WgGatewayServer{}
	case obj.GetKind() == "WgGatewayClient":
		typed = &netv1beta1.WgGatewayClient{}
	default:
		return
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		t.Errorf("the rendered %s does not decode into its Go type: %v", obj.GetKind(), err)
	}
}

// decodeStrict decodes data into a new T, failing t on an unknown field.
func decodeStrict[T any](t *testing.T, data []byte) *T {
	t.Helper()
	obj := new(T)
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}
