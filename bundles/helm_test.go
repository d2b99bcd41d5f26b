package bundles

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/bundles/helmchart"
	"github.com/peerlink/peerlink/internal/kbuild"
	"github.com/peerlink/peerlink/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite the generated files of the Helm chart in helm/peerlink")

// chartDir is the Helm chart made from install/.
const chartDir = "helm/peerlink"

// TestHelmChart keeps the chart's generated files those the install bundle
// gives today; -update rewrites them and removes the ones it no longer
// gives.
func TestHelmChart(t *testing.T) {
	objs, err := kbuild.Build("install")
	if err != nil {
		t.Fatal(err)
	}
	monitoring, err := kbuild.Build("monitoring")
	if err != nil {
		t.Fatal(err)
	}
	want, err := helmchart.Generate(objs, helmchart.Optional{
		Key: "monitoring",
		Comment: "The monitoring bundle (bundles/monitoring): a ServiceMonitor of the controller, PodMonitors\n" +
			"# of the fabric and the gateways, the Grafana dashboard; it needs the Prometheus\n" +
			"# Operator's CRDs.",
		Objects: monitoring,
	})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string][]byte{}
	for _, root := range []string{helmchart.ValuesFile, helmchart.TemplatesDir, helmchart.CRDsDir} {
		err := filepath.WalkDir(filepath.Join(chartDir, root), func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) || err != nil || d.IsDir() {
				return ignoreNotExist(err)
			}
			b, err := os.ReadFile(path)
			rel, _ := filepath.Rel(chartDir, path)
			have[filepath.ToSlash(rel)] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if *update {
		for name := range have {
			if _, ok := want[name]; !ok {
				if err := os.Remove(filepath.Join(chartDir, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range want {
			path := filepath.Join(chartDir, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for name, b := range want {
		if got, ok := have[name]; !ok {
			t.Errorf("%s/%s is missing: run make generate", chartDir, name)
		} else if !bytes.Equal(got, b) {
			t.Errorf("%s/%s is stale: run make generate\n%s", chartDir, name, cmp.Diff(string(b), string(got)))
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			t.Errorf("%s/%s is no longer generated: run make generate", chartDir, name)
		}
	}
}

func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// helm returns the Helm CLI, or skips t (fails it under
// PEERLINK_REQUIRE_PRIVILEGED=1) when it is not built.
func helm(t *testing.T) string {
	t.Helper()
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.Helm(repo)
	testenv.Require(t, "running helm on the chart", err)
	return bin
}

// runHelm runs the Helm CLI with its configuration and cache in the test's
// directories, and returns its standard output.
func runHelm(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// The chart passes helm lint, warnings included.
func TestHelmLint(t *testing.T) {
	t.Log(string(runHelm(t, "lint", "--strict", chartDir)))
}

// helmTemplate renders the chart as `helm install -n namespace` would, CRDs
// included, with the given helm flags.
func helmTemplate(t *testing.T, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out := runHelm(t, append([]string{"template", "peerlink", chartDir, "--namespace", namespace, "--include-crds"}, args...)...)
	return parseObjects(t, out)
}

// parseObjects reads a stream of YAML documents as helm template prints it.
func parseObjects(t *testing.T, stream []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if string(j) == "null" {
			continue // a document of comments only
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		objs = append(objs, u)
	}
}

// objectKey names an object in a comparison.
func objectKey(u *unstructured.Unstructured) string {
	key := u.GetAPIVersion() + " " + u.GetKind() + " "
	if u.GetNamespace() != "" {
		key += u.GetNamespace() + "/"
	}
	return key + u.GetName()
}

// compareObjects fails t unless got and want hold the same objects with the
// same content, whatever their order.
func compareObjects(t *testing.T, got, want []*unstructured.Unstructured) {
	t.Helper()
	index := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, u := range objs {
			if _, dup := m[objectKey(u)]; dup {
				t.Errorf("%s twice", objectKey(u))
			}
			m[objectKey(u)] = u
		}
		return m
	}
	g, w := index(got), index(want)
	var keys []string
	for k := range w {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if g[k] == nil {
			t.Errorf("missing: %s", k)
		} else if d := cmp.Diff(w[k].Object, g[k].Object); d != "" {
			t.Errorf("%s differs (-kustomize +helm):\n%s", k, d)
		}
	}
	for k := range g {
		if w[k] == nil {
			t.Errorf("not in the bundle: %s", k)
		}
	}
}

// withoutNamespace drops the Namespace objects, which the chart leaves to
// helm install --create-namespace.
func withoutNamespace(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	return slices.DeleteFunc(slices.Clone(objs), func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "Namespace"
	})
}

// compareRendered fails t unless the chart rendered what kustomize built,
// once each side is as the other would have it: the ConfigMaps a
// configMapGenerator made lose kustomize's hash suffix, wherever they are
// named, as in the chart; the pod templates lose the chart's checksum
// annotation, which must be on exactly those that name such a ConfigMap.
// It returns the checksums, by workload.
func compareRendered(t *testing.T, helmed, kustomized []*unstructured.Unstructured) map[string]string {
	t.Helper()
	charted := map[string]bool{}
	for _, u := range helmed {
		if u.GetKind() == "ConfigMap" {
			charted[u.GetName()] = true
		}
	}
	// Hashed names, by the name the chart gives.
	renames := map[string]string{}
	for _, u := range kustomized {
		if u.GetKind() != "ConfigMap" || charted[u.GetName()] {
			continue
		}
		for name := range charted {
			if strings.HasPrefix(u.GetName(), name+"-") {
				renames[u.GetName()] = name
			}
		}
	}
	want := make([]*unstructured.Unstructured, 0, len(kustomized))
	readers := map[string]bool{}
	for _, u := range kustomized {
		u = u.DeepCopy()
		if renameStrings(u.Object, renames) && isWorkload(u) {
			readers[objectKey(u)] = true
		}
		want = append(want, u)
	}
	got := make([]*unstructured.Unstructured, 0, len(helmed))
	checksums := map[string]string{}
	for _, u := range helmed {
		u = u.DeepCopy()
		if isWorkload(u) {
			sum, found, err := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", helmchart.ChecksumAnnotation)
			switch {
			case err != nil:
				t.Errorf("%s: %v", objectKey(u), err)
			case found != readers[objectKey(u)]:
				t.Errorf("%s: has annotation %s: %v; reads a generated ConfigMap: %v", objectKey(u), helmchart.ChecksumAnnotation, found, readers[objectKey(u)])
			case found:
				checksums[objectKey(u)] = sum
				unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "annotations", helmchart.ChecksumAnnotation)
				if a, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "metadata", "annotations"); len(a) == 0 {
					unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "annotations")
				}
			}
		}
		got = append(got, u)
	}
	compareObjects(t, got, want)
	return checksums
}

func isWorkload(u *unstructured.Unstructured) bool {
	switch u.GetKind() {
	case "Deployment", "DaemonSet", "StatefulSet":
		return true
	}
	return false
}

// renameStrings replaces, in a decoded JSON value, every string that is a
// key of renames by its value, and reports whether it replaced any.
func renameStrings(v any, renames map[string]string) bool {
	renamed := false
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if s, ok := child.(string); ok && renames[s] != "" {
				v[k], renamed = renames[s], true
			} else if renameStrings(child, renames) {
				renamed = true
			}
		}
	case []any:
		for i, child := range v {
			if s, ok := child.(string); ok && renames[s] != "" {
				v[i], renamed = renames[s], true
			} else if renameStrings(child, renames) {
				renamed = true
			}
		}
	}
	return renamed
}

// With its default values, the chart renders what kustomize builds of the
// install bundle, but the Namespace, and with the facts ConfigMap under
// its own name and its checksum on the controller's pod template.
func TestHelmTemplateDefaults(t *testing.T) {
	checksums := compareRendered(t, helmTemplate(t, "peerlink"), withoutNamespace(mustBuild(t, "install")))
	if len(checksums) == 0 {
		t.Error("no workload carries the checksum of the facts ConfigMap")
	}
}

// With monitoring.enabled, the chart renders what kustomize builds of
// bundles/install and bundles/monitoring.
func TestHelmTemplateMonitoring(t *testing.T) {
	want := withoutNamespace(append(mustBuild(t, "install"), mustBuild(t, "monitoring")...))
	compareRendered(t, helmTemplate(t, "peerlink", "--set", "monitoring.enabled=true"), want)
}

// A change of the facts changes the checksum of every workload that reads
// them, so helm upgrade rolls it out; the same values give the same
// checksums.
func TestHelmChecksumRollsPods(t *testing.T) {
	first := compareRendered(t, helmTemplate(t, "peerlink"), withoutNamespace(mustBuild(t, "install")))
	again := compareRendered(t, helmTemplate(t, "peerlink"), withoutNamespace(mustBuild(t, "install")))
	changed := helmTemplate(t, "peerlink", "--set", "facts.RESERVED_CIDRS=192.168.7.0/24")
	for key, sum := range first {
		if again[key] != sum {
			t.Errorf("%s: checksum %s, then %s, for the same values", key, sum, again[key])
		}
		for _, u := range changed {
			if objectKey(u) != key {
				continue
			}
			if _, ok := u.GetAnnotations()[helmchart.ChecksumAnnotation]; ok {
				t.Errorf("%s: the checksum is on the object, not on its pod template", key)
			}
			sum2, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", helmchart.ChecksumAnnotation)
			if sum2 == "" || sum2 == sum {
				t.Errorf("%s: checksum %q with a fact changed, %q before", key, sum2, sum)
			}
		}
	}
}

func mustBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := kbuild.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// Values land where the kustomize overlay that says the same puts them:
// facts merged into the generated ConfigMap (with the checksum of its
// readers, also for a key the bundle does not have and characters JSON
// escapes),
// the image everywhere it is named, replicas, resources, and the release
// namespace wherever the bundle names its own.
func TestHelmTemplateValues(t *testing.T) {
	overlay := t.TempDir()
	base, err := filepath.Abs("install")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(overlay, base)
	if err != nil {
		t.Fatal(err)
	}
	kustomization := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: peers
resources:
- ` + filepath.ToSlash(rel) + `
configMapGenerator:
- name: peerlink-facts
  namespace: peerlink
  behavior: merge
  literals:
  - CLUSTER_ID=cluster-7
  - POD_CIDRS=10.8.0.0/16,10.9.0.0/16
  - RESERVED_CIDRS=192.168.7.0/24
  - NOT_A_FACT_YET=<a & "b">
images:
- name: ghcr.io/peerlink/peerlink-agent
  newName: registry.example:5000/mirror/peerlink-agent
  newTag: v1.2.3
replicas:
- name: peerlink-controller
  count: 2
patches:
- target:
    kind: DaemonSet
    name: peerlink-fabric
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/resources/requests/cpu
      value: 100m
- target:
    kind: Deployment
    name: peerlink-controller
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/resources/limits/memory
      value: 1Gi
`
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := kbuild.Build(overlay)
	if err != nil {
		t.Fatal(err)
	}
	got := helmTemplate(t, "peers",
		"--set", "facts.CLUSTER_ID=cluster-7",
		"--set", `facts.POD_CIDRS=10.8.0.0/16\,10.9.0.0/16`,
		"--set", "facts.RESERVED_CIDRS=192.168.7.0/24",
		"--set", `facts.NOT_A_FACT_YET=<a & "b">`,
		"--set", "images.agent.repository=registry.example:5000/mirror/peerlink-agent",
		"--set", "images.agent.tag=v1.2.3",
		"--set", "controller.replicas=2",
		"--set", "fabric.resources.requests.cpu=100m",
		"--set", "controller.resources.limits.memory=1Gi")
	compareRendered(t, got, withoutNamespace(want))
}
