package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// TestApplyLeavesOtherManagersFields applies a Configuration the way Flux
// would (server-side, its own field manager), then asks the CLI to change
// it: the CLI reports the conflict, naming that manager, and changes
// nothing; it applies under a manager of its own.
func TestApplyLeavesOtherManagersFields(t *testing.T) {
	scheme, err := api.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	tc := testcluster.Start(t, testcluster.WithScheme(scheme),
		testcluster.WithCRDDirs(filepath.Join(repoRoot, "bundles", "install", "crds")))
	ctx := t.Context()
	conf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
		"metadata": map[string]any{"name": "b", "namespace": "default", "labels": map[string]any{netv1beta1.RemoteClusterIDLabel: "b"}},
		"spec":     map[string]any{"remote": map[string]any{"cidr": map[string]any{"pod": []any{"10.244.0.0/16"}}}},
	}}
	if err := tc.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(conf), client.FieldOwner("kustomize-controller")); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "create", "configuration", "b", "-n", "default", "--remote-cluster-id", "b",
		"--pod-cidr", "10.245.0.0/16", "--kubeconfig", tc.Kubeconfig)
	if code != 1 || !strings.Contains(stderr, "conflict") || !strings.Contains(stderr, "kustomize-controller") {
		t.Errorf("create over Flux's field: exit %d, stderr %q; want a conflict naming kustomize-controller", code, stderr)
	}
	var got netv1beta1.Configuration
	if err := tc.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "b"}, &got); err != nil {
		t.Fatal(err)
	}
	if pods := got.Spec.Remote.CIDR.Pod; len(pods) != 1 || pods[0] != "10.244.0.0/16" {
		t.Errorf("spec.remote.cidr.pod = %v: the CLI took Flux's field", pods)
	}
	// A new object is the CLI's, under its own manager.
	if _, stderr, code := runCLI(t, "create", "configuration", "c", "-n", "default", "--remote-cluster-id", "c",
		"--pod-cidr", "10.246.0.0/16", "--kubeconfig", tc.Kubeconfig); code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	if err := tc.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "c"}, &got); err != nil {
		t.Fatal(err)
	}
	managers := map[string]bool{}
	for _, m := range got.ManagedFields {
		managers[m.Manager] = true
	}
	if !managers[api.CLIFieldManager] || managers[api.FieldManager] {
		t.Errorf("field managers %v, want %s and not the controller's %s", managers, api.CLIFieldManager, api.FieldManager)
	}
}
