package peerbundle

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/clusterinfo"
)

// writeConfigurationBundle writes the client bundle of peer cluster-b: its
// GatewayClient and its Configuration with the given pod and external CIDRs.
func writeConfigurationBundle(t *testing.T, pod, external string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"kustomization.yaml": "resources:\n- configuration.yaml\n- gatewayclient.yaml\n",
		"gatewayclient.yaml": `apiVersion: networking.liqo.io/v1beta1
kind: GatewayClient
metadata:
  name: cluster-b
  namespace: liqo-tenant-cluster-b
  labels:
    liqo.io/remote-cluster-id: cluster-b
spec:
  endpoint:
    addresses: [172.18.0.3]
    port: 30851
`,
		"configuration.yaml": `apiVersion: networking.liqo.io/v1beta1
kind: Configuration
metadata:
  name: cluster-b
  namespace: liqo-tenant-cluster-b
  labels:
    liqo.io/remote-cluster-id: cluster-b
spec:
  remote:
    cidr:
      pod: [` + pod + `]
      external: [` + external + `]
`,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRenderBundleRemapsAsTheController(t *testing.T) {
	info := &clusterinfo.Info{
		ClusterID:    "cluster-a",
		PodCIDRs:     []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ExternalCIDR: netip.MustParsePrefix("10.70.0.0/16"),
	}
	manifests, err := RenderBundle(writeConfigurationBundle(t, "10.244.0.0/16", "10.71.0.0/16"), info)
	if err != nil {
		t.Fatal(err)
	}
	if len(manifests) != 2 || manifests[1]["kind"] != "Configuration" {
		t.Fatalf("%d manifests, want the rendered WgGatewayClient and the Configuration", len(manifests))
	}
	status, _ := manifests[1]["status"].(map[string]any)
	remote, _ := status["remote"].(map[string]any)
	cidr, _ := remote["cidr"].(map[string]any)
	pods, _ := cidr["pod"].([]any)
	ext, _ := cidr["external"].([]any)
	if len(pods) != 1 || pods[0] == "10.244.0.0/16" || len(ext) != 1 || ext[0] != "10.71.0.0/16" {
		t.Errorf("status.remote.cidr = %v: the colliding pod CIDR must be remapped, the free external one kept", cidr)
	}

	// A range the controller refuses is refused here, naming the field.
	_, err = RenderBundle(writeConfigurationBundle(t, "10.244.0.0/16", "8.8.8.0/24"), info)
	if err == nil || !strings.Contains(err.Error(), "spec.remote.cidr.external[0]") {
		t.Errorf("render of a public range: %v, want an error naming spec.remote.cidr.external[0]", err)
	}
}
