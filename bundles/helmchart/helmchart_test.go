package helmchart

import (
	"bytes"
	"strings"
	"testing"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/internal/kbuild"
)

// build runs kustomize on a bundle held in memory: files by name, beside
// its kustomization.yaml.
func build(t *testing.T, files map[string]string) []*unstructured.Unstructured {
	t.Helper()
	fs := filesys.MakeFsInMemory()
	for name, body := range files {
		if err := fs.WriteFile("/b/"+name, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := kbuild.BuildFS(fs, "/b")
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

const namespace = `apiVersion: v1
kind: Namespace
metadata:
  name: peerlink
`

func deployment(name string, containers string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
  namespace: peerlink
spec:
  replicas: 3
  selector:
    matchLabels:
      app: ` + name + `
  template:
    metadata:
      labels:
        app: ` + name + `
    spec:
      containers:
` + containers
}

const agent = `      - name: agent
        image: registry.example:5000/peerlink/peerlink-agent:v1
        resources:
          requests:
            cpu: 10m
`

// A small bundle with each kind of value: a generated ConfigMap read by a
// Deployment, a DaemonSet without replicas, an image also named in a
// custom resource with Go templates of its own, and a binding to the
// bundle's namespace.
var sample = map[string]string{
	"kustomization.yaml": `resources:
- namespace.yaml
- deployment.yaml
- daemonset.yaml
- template.yaml
- binding.yaml
configMapGenerator:
- name: peerlink-facts
  namespace: peerlink
  literals:
  - CLUSTER_ID=
  - POD_CIDRS=10.244.0.0/16
`,
	"namespace.yaml": namespace,
	"deployment.yaml": deployment("peerlink-controller", agent+`        envFrom:
        - configMapRef:
            name: peerlink-facts
`),
	"daemonset.yaml": `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: peerlink-node-agent
  namespace: peerlink
spec:
  selector:
    matchLabels:
      app: node
  template:
    metadata:
      labels:
        app: node
    spec:
      containers:
` + agent,
	"template.yaml": `apiVersion: example.com/v1
kind: Template
metadata:
  name: gateway
  namespace: peerlink
spec:
  name: "{{ .Name }}"
  image: registry.example:5000/peerlink/peerlink-agent:v1
  other:
    image: registry.example:5000/peerlink/peerlink-agent:v2
  namespace: "{{ .Namespace }}"
`,
	"binding.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: peerlink
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: peerlink
subjects:
- kind: ServiceAccount
  name: peerlink
  namespace: peerlink
- kind: ServiceAccount
  name: other
  namespace: kube-system
`,
}

func generate(t *testing.T, files map[string]string) Files {
	t.Helper()
	out, err := Generate(build(t, files))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGenerateTemplates(t *testing.T) {
	out := generate(t, sample)
	for name, want := range map[string][]string{
		"templates/deployment-peerlink-controller.yaml": {
			"  namespace: {{ .Release.Namespace | quote }}\n",
			"  replicas: {{ .Values.controller.replicas }}\n",
			`        image: {{ include "peerlink.image" .Values.images.agent | quote }}` + "\n",
			"            name: peerlink-facts\n",
			"        resources: {{- toYaml .Values.controller.resources | nindent 10 }}\n",
			"      annotations:\n" +
				`        checksum/config: {{ include (print $.Template.BasePath "/configmap-peerlink-facts.yaml") . | sha256sum | quote }}` + "\n",
		},
		"templates/daemonset-peerlink-node-agent.yaml": {
			`      - image: {{ include "peerlink.image" .Values.images.agent | quote }}` + "\n",
			"        resources: {{- toYaml .Values.nodeAgent.resources | nindent 10 }}\n",
		},
		"templates/configmap-peerlink-facts.yaml": {
			`data: {{- include "peerlink.facts.data" . | nindent 2 }}` + "\n",
			"  name: peerlink-facts\n",
		},
		"templates/template-gateway.yaml": {
			// Only an image the workloads run, and only the bundle's
			// namespace, are the chart's.
			`  image: {{ include "peerlink.image" .Values.images.agent | quote }}` + "\n",
			"    image: registry.example:5000/peerlink/peerlink-agent:v2\n",
			`  name: '{{ "{{" }} .Name {{ "}}" }}'` + "\n",
			`  namespace: '{{ "{{" }} .Namespace {{ "}}" }}'` + "\n",
		},
		"templates/clusterrolebinding-peerlink.yaml": {
			"  namespace: {{ .Release.Namespace | quote }}\n",
			"  namespace: kube-system\n",
		},
	} {
		got, ok := out[name]
		if !ok {
			t.Errorf("no %s among %v", name, keys(out))
			continue
		}
		if !bytes.HasPrefix(got, []byte(Header)) {
			t.Errorf("%s does not start with the header", name)
		}
		for _, line := range want {
			if !strings.Contains(string(got), line) {
				t.Errorf("%s has no line %q:\n%s", name, line, got)
			}
		}
	}
	if _, ok := out["templates/namespace-peerlink.yaml"]; ok {
		t.Error("the Namespace has a template: helm install --create-namespace makes it")
	}
	// The DaemonSet reads no ConfigMap: nothing of it changes with the facts.
	if got := string(out["templates/daemonset-peerlink-node-agent.yaml"]); strings.Contains(got, ChecksumAnnotation) {
		t.Errorf("a workload that reads no ConfigMap has a checksum:\n%s", got)
	}
	if !strings.Contains(string(out["templates/_helpers.tpl"]), `{{- define "peerlink.facts.data" -}}`) {
		t.Errorf("_helpers.tpl does not define the data of peerlink-facts:\n%s", out["templates/_helpers.tpl"])
	}
}

// A workload that reads two generated ConfigMaps, one through a volume,
// carries one checksum of both.
func TestGenerateChecksumOfTwoConfigs(t *testing.T) {
	files := map[string]string{
		"kustomization.yaml": `resources:
- namespace.yaml
- deployment.yaml
configMapGenerator:
- name: peerlink-facts
  namespace: peerlink
  literals:
  - CLUSTER_ID=
- name: peerlink-extra
  namespace: peerlink
  literals:
  - K=v
`,
		"namespace.yaml": namespace,
		"deployment.yaml": deployment("peerlink-controller", agent+`        envFrom:
        - configMapRef:
            name: peerlink-facts
      volumes:
      - name: extra
        configMap:
          name: peerlink-extra
`),
	}
	got := string(generate(t, files)["templates/deployment-peerlink-controller.yaml"])
	want := `        checksum/config: {{ print (include (print $.Template.BasePath "/configmap-peerlink-facts.yaml") .) ` +
		`(include (print $.Template.BasePath "/configmap-peerlink-extra.yaml") .) | sha256sum | quote }}` + "\n"
	if !strings.Contains(got, want) || !strings.Contains(got, "          name: peerlink-extra\n") {
		t.Errorf("the Deployment does not carry the checksum of both ConfigMaps:\n%s", got)
	}
}

func keys(f Files) []string {
	var out []string
	for k := range f {
		out = append(out, k)
	}
	return out
}

func TestGenerateValues(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal(generate(t, sample)[ValuesFile], &values); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"facts": map[string]any{"CLUSTER_ID": "", "POD_CIDRS": "10.244.0.0/16"},
		"images": map[string]any{"agent": map[string]any{
			"repository": "registry.example:5000/peerlink/peerlink-agent", "tag": "v1", "digest": "",
		}},
		"controller": map[string]any{"replicas": float64(3), "resources": map[string]any{"requests": map[string]any{"cpu": "10m"}}},
		"nodeAgent":  map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "10m"}}},
	}
	got, _ := yaml.Marshal(values)
	exp, _ := yaml.Marshal(want)
	if !bytes.Equal(got, exp) {
		t.Errorf("values:\n%s\nwant:\n%s", got, exp)
	}
}

// The same bundle gives the same bytes, whatever order maps are walked in.
func TestGenerateIsDeterministic(t *testing.T) {
	first := generate(t, sample)
	for range 5 {
		again := generate(t, sample)
		for name, b := range first {
			if !bytes.Equal(again[name], b) {
				t.Fatalf("%s differs between two runs", name)
			}
		}
	}
}

// A ConfigMap whose name only looks hashed keeps its name and its data.
func TestGenerateLeavesPlainConfigMaps(t *testing.T) {
	files := map[string]string{
		"kustomization.yaml": "resources:\n- namespace.yaml\n- cm.yaml\n",
		"namespace.yaml":     namespace,
		"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: peerlink-abcdefghij\n  namespace: peerlink\ndata:\n  k: v\n",
	}
	out := generate(t, files)
	got := string(out["templates/configmap-peerlink-abcdefghij.yaml"])
	if !strings.Contains(got, "  name: peerlink-abcdefghij\n") || !strings.Contains(got, "  k: v\n") {
		t.Errorf("the ConfigMap was changed:\n%s", got)
	}
	if strings.Contains(string(out[ValuesFile]), "abcdefghij") {
		t.Errorf("the ConfigMap has values:\n%s", out[ValuesFile])
	}
}

func TestGenerateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{{
		name:  "no namespace",
		files: map[string]string{"kustomization.yaml": "resources:\n- d.yaml\n", "d.yaml": deployment("peerlink-a", agent)},
		want:  "no Namespace",
	}, {
		name: "two namespaces",
		files: map[string]string{
			"kustomization.yaml": "resources:\n- ns.yaml\n- ns2.yaml\n", "ns.yaml": namespace,
			"ns2.yaml": strings.Replace(namespace, "name: peerlink", "name: other", 1),
		},
		want: "two Namespaces",
	}, {
		name: "two containers",
		files: map[string]string{
			"kustomization.yaml": "resources:\n- ns.yaml\n- d.yaml\n", "ns.yaml": namespace,
			"d.yaml": deployment("peerlink-a", agent+strings.Replace(agent, "name: agent", "name: second", 1)),
		},
		want: "2 containers",
	}, {
		name: "two images of one name",
		files: map[string]string{
			"kustomization.yaml": "resources:\n- ns.yaml\n- a.yaml\n- b.yaml\n", "ns.yaml": namespace,
			"a.yaml": deployment("peerlink-a", agent),
			"b.yaml": deployment("peerlink-b", strings.Replace(agent, "registry.example:5000/", "other.example/", 1)),
		},
		want: "images.agent",
	}, {
		name: "two workloads of one key",
		files: map[string]string{
			"kustomization.yaml": "resources:\n- ns.yaml\n- a.yaml\n- b.yaml\n", "ns.yaml": namespace,
			"a.yaml": deployment("peerlink-a", agent),
			"b.yaml": strings.Replace(deployment("a", agent), "kind: Deployment", "kind: StatefulSet", 1),
		},
		want: "under a",
	}, {
		name: "the placeholder mark",
		files: map[string]string{
			"kustomization.yaml": "resources:\n- ns.yaml\n- cm.yaml\n", "ns.yaml": namespace,
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: " + tokenMark + "1\n",
		},
		want: tokenMark,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Generate(build(t, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// Escaped text renders as itself through Go's text/template, which Helm
// runs.
func TestEscapeBraces(t *testing.T) {
	for _, s := range []string{
		"{{ .Name }}",
		"gw-{{ .Name }}-{{ .ClusterID }}",
		"{{{ x }}}",
		"}} {{",
		`'{{- "q" -}}'`,
		"no braces",
		"{ single }",
	} {
		tpl, err := template.New("").Parse(escapeBraces(s))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		var out strings.Builder
		if err := tpl.Execute(&out, nil); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if out.String() != s {
			t.Errorf("%q renders as %q", s, out.String())
		}
	}
}

func TestParseImage(t *testing.T) {
	for ref, want := range map[string]image{
		"ghcr.io/peerlink/peerlink-agent:latest": {key: "agent", repository: "ghcr.io/peerlink/peerlink-agent", tag: "latest"},
		"registry.example:5000/peerlink-agent":   {key: "agent", repository: "registry.example:5000/peerlink-agent"},
		"example.com/echo-server:v1@sha256:abc":  {key: "echoServer", repository: "example.com/echo-server", tag: "v1", digest: "sha256:abc"},
		"busybox@sha256:abc":                     {key: "busybox", repository: "busybox", digest: "sha256:abc"},
	} {
		got := parseImage(ref)
		if *got != want {
			t.Errorf("parseImage(%q) = %+v, want %+v", ref, *got, want)
		}
		if got.reference() != ref {
			t.Errorf("reference() of %q = %q", ref, got.reference())
		}
	}
}
