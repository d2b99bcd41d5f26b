package templates

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// customTemplate returns a template of an unknown kind whose spec is spec.
func customTemplate(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.liqo.io/v1beta1",
		"kind":       "WgGatewayServerTemplate",
		"metadata":   map[string]any{"name": "t", "namespace": "peerlink"},
		"spec": map[string]any{
			"objectKind": map[string]any{"apiVersion": "example.com/v1", "kind": "Tunnel"},
			"template":   map[string]any{"spec": spec},
		},
	}}
}

func serverData() Data {
	gw := &netv1beta1.GatewayServer{ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: "ns"}}
	gw.Spec.Default()
	return DataForServer(gw, "uid", "cluster-b", "gw-server")
}

func TestRenderDoesNotModifyTemplate(t *testing.T) {
	defaults, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range defaults {
		before := tmpl.DeepCopy()
		if _, err := Render(tmpl, serverData()); err != nil && tmpl.GetKind() == ServerTemplateKind {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before.Object, tmpl.Object); diff != "" {
			t.Errorf("Render changed %s (-before +after):\n%s", tmpl.GetName(), diff)
		}
	}
}

func TestRenderBadTemplateObjects(t *testing.T) {
	valid := func() map[string]any { return customTemplate(map[string]any{"a": "b"}).Object }
	cases := []struct {
		name   string
		obj    func() map[string]any
		data   Data
		errHas string
	}{
		{"no spec", func() map[string]any { o := valid(); delete(o, "spec"); return o }, serverData(), "spec: missing"},
		{"no objectKind", func() map[string]any {
			o := valid()
			delete(o["spec"].(map[string]any), "objectKind")
			return o
		}, serverData(), "spec.objectKind: missing"},
		{"objectKind kind not a string", func() map[string]any {
			o := valid()
			o["spec"].(map[string]any)["objectKind"].(map[string]any)["kind"] = int64(3)
			return o
		}, serverData(), "spec.objectKind.kind: missing or not a string"},
		{"template a list", func() map[string]any {
			o := valid()
			o["spec"].(map[string]any)["template"] = []any{"x"}
			return o
		}, serverData(), "spec.template: missing or not an object"},
		{"unknown top-level key", func() map[string]any {
			o := valid()
			o["spec"].(map[string]any)["template"].(map[string]any)["status"] = map[string]any{}
			return o
		}, serverData(), `spec.template: unknown field "status"`},
		{"metadata a string", func() map[string]any {
			o := valid()
			o["spec"].(map[string]any)["template"].(map[string]any)["metadata"] = "x"
			return o
		}, serverData(), "metadata: a string, not an object"},
		{"value of a Go type unstructured does not hold", func() map[string]any {
			o := valid()
			o["spec"].(map[string]any)["template"].(map[string]any)["spec"] = map[string]any{"n": 3}
			return o
		}, serverData(), "spec.n: unsupported value of Go type int"},
		{"key made only of the marker", func() map[string]any {
			o := valid()
			o["spec"].(map[string]any)["template"].(map[string]any)["spec"] = map[string]any{"?": "x"}
			return o
		}, serverData(), `a key is one "?" and a name`},
		{"key with two markers", func() map[string]any {
			o := valid()
			o["spec"].(map[string]any)["template"].(map[string]any)["spec"] = map[string]any{"??a": "x"}
			return o
		}, serverData(), `spec["??a"]: a key is one "?" and a name`},
		{"no name", valid, Data{}, "Data.Name is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(&unstructured.Unstructured{Object: c.obj()}, c.data)
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Fatalf("err = %v, want it to contain %q", err, c.errHas)
			}
		})
	}
	if _, err := Render(nil, serverData()); err == nil {
		t.Error("Render(nil) succeeded")
	}
}

func TestRenderLimits(t *testing.T) {
	cases := []struct {
		name string
		text string
		want error
	}{
		{"range", "{{ range 20000 }}{{ end }}", errTooManySteps},
		{"nested range", "{{ range 200 }}{{ range 200 }}{{ end }}{{ end }}", errTooManySteps},
		{"recursion", `{{ define "r" }}{{ template "r" }}{{ end }}{{ template "r" }}`, errTooManySteps},
		{"printf width bomb", `{{ printf "%999999999d" 1 }}`, errWidth},
		{"printf precision bomb", `{{ printf "%.999999999f" 1.0 }}`, errWidth},
		{"printf star width", `{{ printf "%*d" 999999999 1 }}`, errWidth},
		{"printf star precision", `{{ printf "%-8.*s" 100000000 "x" }}`, errWidth},
		{"printf indexed star", `{{ printf "%[2]*[1]d" 1 100000000 }}`, errWidth},
		{"printf negative star", `{{ printf "%*d" -100000000 1 }}`, errWidth},
		{"long output", "{{ range 2000 }}" + strings.Repeat("x", 1000) + "{{ end }}", errOutputTooLarge},
		{"doubling", `{{ $s := "xxxxxxxx" }}{{ range 40 }}{{ $s = print $s $s }}{{ end }}`, errOutputTooLarge},
		{"printf width", `{{ range 3 }}{{ printf "%0999999d" 1 }}{{ end }}`, errWidth},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(customTemplate(map[string]any{"v": c.text}), serverData())
			// On a loaded machine the time budget may stop a long run
			// before its step budget does: either ends it.
			stepsOrTime := c.want == errTooManySteps && errors.Is(err, errTooSlow)
			if !errors.Is(err, c.want) && !stepsOrTime {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), "spec.v: template") {
				t.Errorf("err = %v, want the field path", err)
			}
		})
	}
	// Widths up to the limit format as ever.
	got, err := Render(customTemplate(map[string]any{"v": `{{ printf "%08.3f|%*d|%-4s|%%|%[1]v" 1.5 5 7 "ab" }}`}), serverData())
	if err != nil || got.Object["spec"].(map[string]any)["v"] != "0001.500|    7|ab  |%|1.5" {
		t.Errorf("printf with small widths: %v, %v", got, err)
	}
	// The budgets are per object: 2,000 strings of 9,999 iterations each
	// stop within a second, and a width bomb allocates next to nothing.
	loops := map[string]any{}
	for i := range 2000 {
		loops[fmt.Sprintf("k%d", i)] = "{{ range 9999 }}x{{ end }}"
	}
	start := time.Now()
	if _, err := Render(customTemplate(loops), serverData()); !errors.Is(err, errTooManySteps) && !errors.Is(err, errTooSlow) && !errors.Is(err, errOutputTooLarge) {
		t.Errorf("2,000 loops of 9,999: err = %v, want a budget error", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("2,000 loops of 9,999 took %v to fail, want under 1 s", took)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Render(customTemplate(map[string]any{"v": `{{ range 100 }}{{ printf "%0900000000d|%.900000000f" 1 1.0 }}{{ end }}`}), serverData())
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errWidth) {
		t.Errorf("width bomb: err = %v, want %v", err, errWidth)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
		t.Errorf("a width bomb allocated %d MB, want under 100 MB", alloc>>20)
	}
	// The output budget is per object too: many strings may each use part
	// of it.
	spec := map[string]any{}
	for i := range 20 {
		spec[strings.Repeat("k", i+1)] = strings.Repeat("x", 60000)
	}
	if _, err := Render(customTemplate(spec), serverData()); !errors.Is(err, errOutputTooLarge) {
		t.Errorf("20 strings of 60 kB: err = %v, want %v", err, errOutputTooLarge)
	}
}

func TestRenderPointers(t *testing.T) {
	gw := &netv1beta1.GatewayServer{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}}
	gw.Spec.Endpoint.NodePort = ptr.To[int32](30001)
	gw.Spec.Endpoint.LoadBalancerIP = ptr.To("192.0.2.1")
	data := DataForServer(gw, "", "", "")
	got, err := Render(customTemplate(map[string]any{
		"?nodePort": "{{ .Spec.Endpoint.NodePort }}",
		"ip":        "{{ .Spec.Endpoint.LoadBalancerIP }}",
		"nilSpec":   "{{ .Spec.ServiceLabels }}",
	}), data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"nodePort": int64(30001), "ip": "192.0.2.1", "nilSpec": "map[]"}
	if diff := cmp.Diff(want, got.Object["spec"]); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
}

func TestJoin(t *testing.T) {
	gw := &netv1beta1.GatewayClient{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	gw.Spec.Endpoint.Addresses = []string{"192.0.2.1", "gw.example.com"}
	got, err := Render(customTemplate(map[string]any{
		"call": `{{ join "," .Spec.Endpoint.Addresses }}`,
		"pipe": `{{ .Spec.Endpoint.Addresses | join ";" }}`,
	}), DataForClient(gw, "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"call": "192.0.2.1,gw.example.com", "pipe": "192.0.2.1;gw.example.com"}
	if diff := cmp.Diff(want, got.Object["spec"]); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
}

func TestSetDefaults(t *testing.T) {
	var s netv1beta1.GatewayServerSpec
	s.Default()
	if s.MTU != 1340 || s.Endpoint.Port != 51840 || s.Endpoint.ServiceType != corev1.ServiceTypeClusterIP {
		t.Errorf("server defaults: %+v", s)
	}
	s = netv1beta1.GatewayServerSpec{MTU: 1400, Endpoint: netv1beta1.Endpoint{Port: 4000, ServiceType: corev1.ServiceTypeNodePort}}
	s.Default()
	if s.MTU != 1400 || s.Endpoint.Port != 4000 || s.Endpoint.ServiceType != corev1.ServiceTypeNodePort {
		t.Errorf("server defaults overwrote set fields: %+v", s)
	}

	var c netv1beta1.GatewayClientSpec
	c.Default()
	if c.MTU != 1340 || c.Endpoint.Protocol != corev1.ProtocolUDP || c.Endpoint.Port != 0 {
		t.Errorf("client defaults: %+v", c)
	}
}

func TestKeySecretName(t *testing.T) {
	if got := KeySecretName("server", corev1.LocalObjectReference{}); got != "gw-server" {
		t.Errorf("generated: %q", got)
	}
	if got := KeySecretName("server", corev1.LocalObjectReference{Name: "mine"}); got != "mine" {
		t.Errorf("user's: %q", got)
	}
}

func TestTemplateRefs(t *testing.T) {
	s := &netv1beta1.GatewayServerSpec{}
	want := corev1.ObjectReference{APIVersion: "networking.liqo.io/v1beta1", Kind: "WgGatewayServerTemplate", Name: "wireguard-server", Namespace: "peerlink"}
	if got := ServerTemplateRef(s, "peerlink"); got != want {
		t.Errorf("server default ref: %+v", got)
	}
	s.ServerTemplateRef = corev1.ObjectReference{Name: "custom", Namespace: "infra", UID: "ignored"}
	want.Name, want.Namespace = "custom", "infra"
	if got := ServerTemplateRef(s, "peerlink"); got != want {
		t.Errorf("server partial ref: %+v", got)
	}
	c := &netv1beta1.GatewayClientSpec{ClientTemplateRef: corev1.ObjectReference{Kind: "OtherTemplate", APIVersion: "example.com/v1"}}
	wantC := corev1.ObjectReference{APIVersion: "example.com/v1", Kind: "OtherTemplate", Name: "wireguard-client", Namespace: "sys"}
	if got := ClientTemplateRef(c, "sys"); got != wantC {
		t.Errorf("client ref: %+v", got)
	}
}

func TestRenderServerWithoutService(t *testing.T) {
	gw := &netv1beta1.GatewayServer{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}}
	gw.Spec.ServiceLabels = map[string]string{"a": "b"}
	_, err := RenderServer(customTemplate(map[string]any{"x": "y"}), gw, DataForServer(gw, "", "", ""))
	if err == nil || !strings.Contains(err.Error(), "spec.serviceLabels") {
		t.Fatalf("err = %v, want one naming spec.serviceLabels", err)
	}
	gw.Spec.ServiceLabels = nil
	if _, err := RenderServer(customTemplate(map[string]any{"x": "y"}), gw, DataForServer(gw, "", "", "")); err != nil {
		t.Fatalf("nothing to merge: %v", err)
	}
}
