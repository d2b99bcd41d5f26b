package cli

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/version"
)

// TestVersionClient prints this command's version without a cluster, as a
// summary and as JSON; a bad -o is named.
func TestVersionClient(t *testing.T) {
	stdout, stderr, code := runCLI(t, "version", "--client")
	if code != 0 || !strings.HasPrefix(stdout, "Client Version: ") || !strings.Contains(stdout, runtime.Version()) || strings.Contains(stdout, "Controller") {
		t.Errorf("version --client: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = runCLI(t, "version", "--client", "-o", "json")
	var doc map[string]map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); code != 0 || err != nil {
		t.Fatalf("version --client -o json: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if doc["clientVersion"]["goVersion"] != runtime.Version() || doc["clientVersion"]["platform"] != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("clientVersion %v", doc["clientVersion"])
	}
	if _, ok := doc["controllerVersion"]; ok {
		t.Errorf("--client printed a controller version: %v", doc)
	}
	_, stderr, code = runCLI(t, "version", "--client", "-o", "xml")
	if code != 1 || !strings.Contains(stderr, "--output") {
		t.Errorf("version -o xml: exit %d, %s", code, stderr)
	}
}

// TestCheckVersion warns, naming both versions and the cluster, only when
// the controller publishes a version other than the command's.
func TestCheckVersion(t *testing.T) {
	s, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cm := func(v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: clusterinfo.Name, Namespace: "peerlink"},
			Data:       map[string]string{clusterinfo.KeyControllerVersion: v},
		}
	}
	for _, tc := range []struct {
		name    string
		cli     string
		objects []*corev1.ConfigMap
		want    string
	}{
		{"differ", "v0.3.0", []*corev1.ConfigMap{cm("v0.2.0")},
			"warning: remote cluster: the peerlink controller runs version v0.2.0, this command is version v0.3.0"},
		{"same", "v0.3.0", []*corev1.ConfigMap{cm("v0.3.0")}, ""},
		{"controller names none", "v0.3.0", []*corev1.ConfigMap{cm("")}, ""},
		{"not installed", "v0.3.0", nil, ""},
		{"command without a version", "", []*corev1.ConfigMap{cm("v0.2.0")}, ""},
	} {
		b := fake.NewClientBuilder().WithScheme(s)
		for _, o := range tc.objects {
			b = b.WithObjects(o)
		}
		var stderr bytes.Buffer
		g := &globalOptions{PeerlinkNamespace: "peerlink", build: version.Info{Version: tc.cli}, stderr: &stderr}
		g.checkVersion(t.Context(), b.Build(), "remote")
		if got := stderr.String(); (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: warned %q, want %q", tc.name, got, tc.want)
		}
	}
}
