package templates

import (
	"strings"
	"testing"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

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

func TestWithImage(t *testing.T) {
	defaults, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	const image = "registry.example/peerlink/peerlink-agent:v1.2.3"
	for _, d := range WithImage(defaults, image) {
		out, err := d.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), DefaultImage) || !strings.Contains(string(out), `"image":"`+image+`"`) {
			t.Errorf("%s still runs %s, or not %s:\n%s", d.GetName(), DefaultImage, image, out)
		}
	}
	again, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := again[0].MarshalJSON(); !strings.Contains(string(out), DefaultImage) {
		t.Errorf("the embedded defaults changed")
	}
}
