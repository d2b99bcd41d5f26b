package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/templates"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// execRender runs peerlink render with args and stdin, as the command line
// would.
func execRender(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newRenderCmd()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	err := cmd.Execute()
	return out.String(), err
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRenderGoldenGateways renders the gateways of the template golden
// cases that use a default template: the command must print exactly what
// package templates renders for them.
func TestRenderGoldenGateways(t *testing.T) {
	gateways, err := filepath.Glob("../testdata/templates/*/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, gw := range gateways {
		dir := filepath.Dir(gw)
		if _, err := os.Stat(filepath.Join(dir, "template.yaml")); err == nil {
			continue
		}
		n++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(dir, "expected.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := execRender(t, "", "-f", gw)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
	if n < 5 {
		t.Fatalf("only %d golden gateways use a default template", n)
	}
}

const customServer = `apiVersion: networking.liqo.io/v1beta1
kind: GatewayServer
metadata:
  name: edge
  namespace: tenants
spec:
  serverTemplateRef:
    name: tiny
  endpoint:
    serviceType: ClusterIP
---
apiVersion: networking.liqo.io/v1beta1
kind: WgGatewayServerTemplate
metadata:
  name: tiny
spec:
  objectKind:
    apiVersion: networking.liqo.io/v1beta1
    kind: WgGatewayServer
  template:
    metadata:
      labels:
        peer: "{{ .ClusterID }}"
    spec:
      service:
        spec:
          type: "{{ .Spec.Endpoint.ServiceType }}"
          ports:
          - port: "{{ .Spec.Endpoint.Port }}"
      deployment:
        spec:
          template:
            spec:
              containers:
              - name: gw
                image: gw
                args: ["{{ .GatewayUID }}", "{{ .SecretName }}", "{{ .Spec.MTU }}"]
`

func TestRenderCustomTemplateFromStdin(t *testing.T) {
	// The gateway has no remote-cluster-id label: --cluster-id stands for it.
	got, err := execRender(t, customServer, "-f", "-", "-o", "json",
		"--cluster-id", "cluster-z", "--uid", "1234", "--secret-name", "my-keys")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(got), &obj); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, got)
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetKind() != "WgGatewayServer" || u.GetName() != "edge" || u.GetNamespace() != "tenants" {
		t.Errorf("rendered %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	if u.GetLabels()["peer"] != "cluster-z" {
		t.Errorf("labels: %v", u.GetLabels())
	}
	args, _, _ := unstructured.NestedFieldNoCopy(obj, "spec", "deployment", "spec", "template", "spec", "containers")
	wantArgs := []any{"1234", "my-keys", "1340"}
	if c, ok := args.([]any); !ok || len(c) != 1 || !reflect.DeepEqual(c[0].(map[string]any)["args"], wantArgs) {
		t.Errorf("containers: %v, want args %v", args, wantArgs)
	}
	port, _, _ := unstructured.NestedSlice(obj, "spec", "service", "spec", "ports")
	if len(port) != 1 || port[0].(map[string]any)["port"] != float64(51840) {
		t.Errorf("ports: %v, want the defaulted port as a number", port)
	}
}

func TestRenderSeveralGateways(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", `apiVersion: networking.liqo.io/v1beta1
kind: GatewayClient
metadata: {name: c, namespace: x, labels: {liqo.io/remote-cluster-id: b}}
spec: {endpoint: {addresses: [192.0.2.1], port: 40000}}
---
apiVersion: networking.liqo.io/v1beta1
kind: Configuration
metadata: {name: b, namespace: x, labels: {liqo.io/remote-cluster-id: b}}
spec: {remote: {cidr: {pod: [10.1.0.0/16], external: [10.2.0.0/16]}}}
`)
	b := writeFile(t, dir, "b.yaml", `apiVersion: networking.liqo.io/v1beta1
kind: GatewayServer
metadata: {name: s, labels: {liqo.io/remote-cluster-id: c}}
`)
	got, err := execRender(t, "", "-f", a, "-f", b)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.ParseManifests([]byte(got))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	want := []string{"WgGatewayClient x/c", "WgGatewayServer default/s"}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("rendered %v, want %v", kinds, want)
	}
}

func TestRenderErrors(t *testing.T) {
	const server = `apiVersion: networking.liqo.io/v1beta1
kind: GatewayServer
metadata:
  name: server
  namespace: ns
  labels:
    liqo.io/remote-cluster-id: peer
`
	badTemplate := strings.Replace(strings.SplitN(customServer, "---\n", 2)[1], `"{{ .SecretName }}"`, `"{{ .Secret }}"`, 1)
	type file struct{ name, content string }
	gw := func(content string) []file { return []file{{"gw.yaml", content}} }
	cases := []struct {
		name  string
		files []file
		args  []string
		want  []string
	}{
		{"missing label", gw(strings.Replace(server, "liqo.io/remote-cluster-id: peer", "app: x", 1)), nil,
			[]string{"gw.yaml: GatewayServer ns/server: metadata.labels[liqo.io/remote-cluster-id]: Required value"}},
		{"unknown field", gw(server + "spec:\n  mtuu: 1400\n"), nil,
			[]string{"gw.yaml: GatewayServer ns/server:", `unknown field "spec.mtuu"`}},
		{"port out of range", gw(server + "spec:\n  endpoint:\n    port: 70000\n"), nil,
			[]string{"gw.yaml: GatewayServer ns/server: spec.endpoint.port: Invalid value: 70000"}},
		{"wrong type", gw(server + "spec:\n  mtu: big\n"), nil,
			[]string{"gw.yaml: GatewayServer ns/server:", "mtu"}},
		{"template not found", gw(server + "spec:\n  serverTemplateRef: {name: nope}\n"), nil,
			[]string{"gw.yaml: GatewayServer ns/server: spec.serverTemplateRef: WgGatewayServerTemplate peerlink/nope not found"}},
		{"template does not render", []file{
			{"gw.yaml", server + "spec:\n  serverTemplateRef: {name: tiny}\n"},
			{"tmpl.yaml", badTemplate},
		}, nil, []string{"tmpl.yaml: WgGatewayServerTemplate tiny: spec.deployment.spec.template.spec.containers[0].args[1]:",
			"can't evaluate field Secret", "(rendering gw.yaml: GatewayServer ns/server)"}},
		{"template of a built-in kind", []file{
			{"gw.yaml", server + "spec:\n  serverTemplateRef: {name: tiny}\n"},
			{"tmpl.yaml", strings.Replace(strings.SplitN(customServer, "---\n", 2)[1],
				"objectKind:\n    apiVersion: networking.liqo.io/v1beta1\n    kind: WgGatewayServer", "objectKind:\n    apiVersion: apps/v1\n    kind: DaemonSet", 1)},
		}, nil, []string{"gw.yaml: GatewayServer ns/server: spec.serverTemplateRef: tmpl.yaml: renders apps/v1 DaemonSet, a kind built into Kubernetes"}},
		{"template twice", []file{
			{"gw.yaml", server + "spec:\n  serverTemplateRef: {name: tiny}\n"},
			{"tmpl.yaml", badTemplate},
			{"again.yaml", badTemplate},
		}, nil, []string{"spec.serverTemplateRef: WgGatewayServerTemplate peerlink/tiny is given twice"}},
		{"bad YAML", gw(server + "---\nkind: [\n"), nil,
			[]string{"gw.yaml: document 2:"}},
		{"no gateway", gw("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), nil,
			[]string{"no GatewayServer or GatewayClient"}},
		{"unknown output", gw(server), []string{"-o", "xml"},
			[]string{"--output: unknown output format \"xml\""}},
		{"missing file", nil, []string{"-f", "missing.yaml"},
			[]string{"missing.yaml: no such file"}},
		{"stdin twice", nil, []string{"-f", "-", "-f", "-"},
			[]string{"standard input can be given once"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			args := c.args
			for _, f := range c.files {
				writeFile(t, dir, f.name, f.content)
				args = append(args, "-f", f.name)
			}
			out, err := execRender(t, "", args...)
			if err == nil {
				t.Fatalf("render succeeded:\n%s", out)
			}
			if out != "" {
				t.Errorf("render printed on failure:\n%s", out)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// TestRenderedAcceptedByAPIServer renders the reference-shaped gateways of
// testdata/api/valid with the default templates and creates the results in
// a real API server with peerlink's CRDs: they must be accepted, and stored
// without losing a field to pruning.
func TestRenderedAcceptedByAPIServer(t *testing.T) {
	gateways, err := filepath.Glob("../testdata/api/valid/gateway*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(gateways) < 4 {
		t.Fatalf("found %d reference gateways", len(gateways))
	}
	cluster := testcluster.Start(t, testcluster.WithCRDDirs("../bundles/install/crds"))
	ctx := context.Background()

	// The default templates the controller applies are accepted too.
	if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "peerlink"}}); err != nil {
		t.Fatal(err)
	}
	defaults, err := templates.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range defaults {
		if err := cluster.Client.Create(ctx, o); err != nil {
			t.Errorf("create %s: %v", o.GetName(), err)
		}
	}

	for _, gw := range gateways {
		t.Run(filepath.Base(gw), func(t *testing.T) {
			out, err := execRender(t, "", "-f", gw)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := manifests.ParseManifests([]byte(out))
			if err != nil || len(objs) != 1 {
				t.Fatalf("render printed %d objects (%v):\n%s", len(objs), err, out)
			}
			obj := objs[0]
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetNamespace()}}
			if err := cluster.Client.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
			// Each reference gateway has the same name: start afresh.
			_ = cluster.Client.Delete(ctx, obj.DeepCopy())
			if err := cluster.Client.Create(ctx, obj.DeepCopy()); err != nil {
				t.Fatalf("the API server refuses the rendered %s: %v\n%s", obj.GetKind(), err, out)
			}
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(obj.GroupVersionKind())
			if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
				t.Fatal(err)
			}
			if missing := missingFields("spec", obj.Object["spec"], stored.Object["spec"]); len(missing) > 0 {
				y, _ := yaml.Marshal(stored.Object["spec"])
				t.Errorf("the API server dropped %v; stored spec:\n%s", missing, y)
			}
		})
	}
}

// missingFields lists the paths of want that got lacks or holds otherwise;
// got may have more (defaults the API server adds).
func missingFields(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path}
		}
		var out []string
		for k, v := range w {
			out = append(out, missingFields(path+"."+k, v, g[k])...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, missingFields(path+"[]", w[i], g[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{path}
	}
	return nil
}
