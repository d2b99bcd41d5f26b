package peerbundle

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// remoteServer serves a ConfigMap at every path and counts the requests.
func remoteServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: liqo-tenant-cluster-b\n"))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestLintAndRenderFetchNothing lints and renders bundles that list a
// remote resource, at the top or in a nested local base, as a URL or a git
// repository: the finding names the kustomization file and the entry, and
// the server saw no request.
func TestLintAndRenderFetchNothing(t *testing.T) {
	srv, requests := remoteServer(t)
	url := srv.URL + "/extra.yaml"
	for name, c := range map[string]struct {
		extra map[string]string // files added to a valid client bundle
		file  string            // the kustomization file the finding names
		entry string
	}{
		"URL": {map[string]string{KustomizationFile: "+" + url}, KustomizationFile, url},
		"URL in a nested base": {map[string]string{
			KustomizationFile:                "+base",
			"base/kustomization.yaml":        "resources:\n- deeper\n",
			"base/deeper/kustomization.yaml": "resources:\n- " + url + "\n",
		}, filepath.Join("base", "deeper", "kustomization.yaml"), url},
		"git repository": {map[string]string{KustomizationFile: "+github.com/example/peering//extras?ref=v1"}, KustomizationFile, "github.com/example/peering//extras?ref=v1"},
		"git over ssh":   {map[string]string{KustomizationFile: "+git@example.com:example/peering.git"}, KustomizationFile, "git@example.com:example/peering.git"},
		"HTTP git URL":   {map[string]string{KustomizationFile: "+" + srv.URL + "/example/peering.git//extras"}, KustomizationFile, srv.URL + "/example/peering.git//extras"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeConfigurationBundle(t, "10.244.0.0/24", "10.70.0.0/16")
			for f, data := range c.extra {
				path := filepath.Join(dir, f)
				if entry, ok := strings.CutPrefix(data, "+"); ok {
					old, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					data = string(old) + "- " + entry + "\n"
				}
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			findings := Lint(dir, rangepolicy.Policy{})
			if len(findings) != 1 || findings[0].File != filepath.Join(dir, c.file) || !strings.Contains(findings[0].Msg, `"`+c.entry+`"`) ||
				!strings.Contains(findings[0].Msg, "fetch nothing") {
				t.Fatalf("findings %v, want one naming %s and %q", findings, c.file, c.entry)
			}
			if _, err := RenderBundle(dir, &clusterinfo.Info{ClusterID: "cluster-a"}); err == nil || !strings.Contains(err.Error(), c.entry) {
				t.Fatalf("render: %v, want an error naming %q", err, c.entry)
			}
			if findings := LintPair(dir, dir); findings != nil {
				t.Fatalf("lint of a pair: %v", findings)
			}
			if n := requests.Load(); n != 0 {
				t.Fatalf("%d requests to the server, want none", n)
			}
		})
	}
}
