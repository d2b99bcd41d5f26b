package kbuild

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n"

// countingServer serves a ConfigMap at every path and counts the requests.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		_, _ = w.Write([]byte(configMap))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestBuildLocalRefusesRemote builds kustomizations that name something
// remote, at the top or in a local base, in each field kustomize fetches
// from: the build fails with an error naming the file, the field and the
// entry, and the server saw no request. BuildFS of the first one does
// fetch, which shows the server would have been asked.
func TestBuildLocalRefusesRemote(t *testing.T) {
	srv, requests := countingServer(t)
	url := srv.URL + "/cm.yaml"
	cases := []struct {
		name        string
		files       map[string]string
		file, field string
		entry       string
	}{
		{"http resource", map[string]string{"/b/kustomization.yaml": "resources:\n- " + url + "\n"}, "/b/kustomization.yaml", "resources[0]", url},
		{"http resource in a nested base", map[string]string{
			"/b/kustomization.yaml":            "resources:\n- cm.yaml\n- base\n",
			"/b/cm.yaml":                       configMap,
			"/b/base/kustomization.yaml":       "resources:\n- deeper\n",
			"/b/base/deeper/kustomization.yml": "resources:\n- " + url + "\n",
		}, "/b/base/deeper/kustomization.yml", "resources[0]", url},
		{"git repository", map[string]string{"/b/kustomization.yaml": "resources:\n- github.com/example/bundle//peers/b?ref=v1\n"}, "/b/kustomization.yaml", "resources[0]", "github.com/example/bundle//peers/b?ref=v1"},
		{"git over ssh", map[string]string{"/b/kustomization.yaml": "resources:\n- git@example.com:org/repo.git\n"}, "/b/kustomization.yaml", "resources[0]", "git@example.com:org/repo.git"},
		{"forced git", map[string]string{"/b/kustomization.yaml": "bases:\n- git::https://example.com/org/repo\n"}, "/b/kustomization.yaml", "bases[0]", "git::https://example.com/org/repo"},
		{"remote component", map[string]string{"/b/kustomization.yaml": "components:\n- https://example.com/org/repo.git//c\n"}, "/b/kustomization.yaml", "components[0]", "https://example.com/org/repo.git//c"},
		{"file URL", map[string]string{"/b/kustomization.yaml": "resources:\n- file:///srv/repo\n"}, "/b/kustomization.yaml", "resources[0]", "file:///srv/repo"},
		{"remote patch", map[string]string{"/b/kustomization.yaml": "resources:\n- cm.yaml\npatches:\n- path: " + url + "\n", "/b/cm.yaml": configMap}, "/b/kustomization.yaml", "patches[0].path", url},
		{"remote strategic merge patch", map[string]string{"/b/kustomization.yaml": "patchesStrategicMerge:\n- " + url + "\n"}, "/b/kustomization.yaml", "patchesStrategicMerge[0]", url},
		{"remote generator file", map[string]string{"/b/kustomization.yaml": "configMapGenerator:\n- name: x\n  files:\n  - key=" + url + "\n"}, "/b/kustomization.yaml", "configMapGenerator[0].files[0]", url},
		{"remote env file", map[string]string{"/b/kustomization.yaml": "secretGenerator:\n- name: x\n  envs:\n  - " + url + "\n"}, "/b/kustomization.yaml", "secretGenerator[0].envs[0]", url},
		{"remote transformer", map[string]string{"/b/kustomization.yaml": "transformers:\n- " + url + "\n"}, "/b/kustomization.yaml", "transformers[0]", url},
		{"remote crd", map[string]string{"/b/kustomization.yaml": "crds:\n- " + url + "\n"}, "/b/kustomization.yaml", "crds[0]", url},
		{"remote openapi", map[string]string{"/b/kustomization.yaml": "openapi:\n  path: " + url + "\n"}, "/b/kustomization.yaml", "openapi.path", url},
		{"remote replacement", map[string]string{"/b/kustomization.yaml": "replacements:\n- path: " + url + "\n"}, "/b/kustomization.yaml", "replacements[0].path", url},
		{"chart repository", map[string]string{"/b/kustomization.yaml": "helmCharts:\n- name: x\n  repo: " + srv.URL + "\n"}, "/b/kustomization.yaml", "helmCharts[0].repo", srv.URL},
		{"upper-case scheme", map[string]string{"/b/Kustomization": "resources:\n- HTTP://" + strings.TrimPrefix(url, "http://") + "\n"}, "/b/Kustomization", "resources[0]", "HTTP://" + strings.TrimPrefix(url, "http://")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := filesys.MakeFsInMemory()
			for p, data := range c.files {
				if err := fs.WriteFile(p, []byte(data)); err != nil {
					t.Fatal(err)
				}
			}
			_, err := BuildLocalFS(fs, "/b")
			var re *RemoteError
			if !errors.As(err, &re) || re.File != c.file || re.Field != c.field || re.Entry != c.entry {
				t.Fatalf("err = %v, want a RemoteError for %s %s %q", err, c.file, c.field, c.entry)
			}
			if !strings.Contains(err.Error(), c.file+": "+c.field+": ") {
				t.Errorf("error %q does not name the file and the field", err)
			}
			if n := requests.Load(); n != 0 {
				t.Fatalf("%d requests to the server, want none", n)
			}
		})
	}
	// The check is what keeps the server unasked: kustomize itself fetches.
	fs := filesys.MakeFsInMemory()
	if err := fs.WriteFile("/b/kustomization.yaml", []byte("resources:\n- "+url+"\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildFS(fs, "/b"); err != nil {
		t.Fatalf("BuildFS of a remote resource: %v", err)
	}
	if requests.Load() == 0 {
		t.Fatal("BuildFS asked the server nothing: the test server is not what kustomize would fetch")
	}
}

// TestBuildLocalBuildsLocal builds a kustomization with local bases,
// inline patches and a cycle of bases: all local, the check lets it
// through to kustomize.
func TestBuildLocalBuildsLocal(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	for p, data := range map[string]string{
		"/b/kustomization.yaml":      "namespace: ns1\nresources:\n- base\n- ./cm2.yaml\npatches:\n- patch: |\n    apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: a\n    data:\n      k: patched\n",
		"/b/cm2.yaml":                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
		"/b/base/kustomization.yaml": "resources:\n- cm.yaml\n",
		"/b/base/cm.yaml":            configMap,
	} {
		if err := fs.WriteFile(p, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := BuildLocalFS(fs, "/b")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetNamespace() != "ns1" {
		t.Fatalf("got %v", objs)
	}
	if err := fs.WriteFile("/b/base/kustomization.yaml", []byte("resources:\n- cm.yaml\n- ..\n")); err != nil {
		t.Fatal(err)
	}
	if err := CheckLocal(fs, "/b"); err != nil {
		t.Fatalf("a cycle of local bases: %v", err)
	}
}
