package templates

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

const bundleDir = "../bundles/install/templates"

// bundleHeader starts each copy of a default template in the install bundle.
func bundleHeader(name string) string {
	return "# Generated from templates/" + name + ": edit that file, then run\n" +
		"# `go test ./templates -run TestInstallBundle -update`.\n"
}

// TestInstallBundle keeps the install bundle's copies of the default
// templates identical to the embedded ones (plus a header), and listed in
// the bundle's kustomization.
func TestInstallBundle(t *testing.T) {
	names := []string{serverFile, clientFile}
	for _, name := range names {
		src, err := defaultFS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		want := bundleHeader(name) + string(src)
		path := filepath.Join(bundleDir, name)
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s differs from templates/%s: run go test ./templates -run TestInstallBundle -update", path, name)
		}
	}

	b, err := os.ReadFile(filepath.Join(bundleDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(k.Resources, names) {
		t.Errorf("%s/kustomization.yaml lists %v, want %v", bundleDir, k.Resources, names)
	}
}

func TestDefaults(t *testing.T) {
	defaults, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ kind, name, objectKind string }{
		{ServerTemplateKind, netv1beta1.DefaultServerTemplateName, "WgGatewayServer"},
		{ClientTemplateKind, netv1beta1.DefaultClientTemplateName, "WgGatewayClient"},
	}
	if len(defaults) != len(want) {
		t.Fatalf("Defaults() returned %d objects, want %d", len(defaults), len(want))
	}
	for i, w := range want {
		d := defaults[i]
		if d.GetKind() != w.kind || d.GetName() != w.name || d.GetNamespace() != InstallNamespace {
			t.Errorf("default %d is %s %s/%s, want %s %s/%s", i, d.GetKind(), d.GetNamespace(), d.GetName(), w.kind, InstallNamespace, w.name)
		}
		if d.GetAPIVersion() != netv1beta1.GroupVersion.String() {
			t.Errorf("default %s has apiVersion %q", d.GetName(), d.GetAPIVersion())
		}
		kind, err := objectKind(d.Object["spec"].(map[string]any))
		if err != nil || kind.Kind != w.objectKind {
			t.Errorf("default %s renders %v (%v), want %s", d.GetName(), kind, err, w.objectKind)
		}
	}
	// Each call returns fresh copies, so a caller may change its own.
	defaults[0].SetName("changed")
	again, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	if again[0].GetName() != netv1beta1.DefaultServerTemplateName {
		t.Errorf("changing a returned default changed the next call's: %s", again[0].GetName())
	}
}
