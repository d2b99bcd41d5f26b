package peerbundle

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/manifests"
)

// writeConfigurationBundle writes the client bundle of peer cluster-b: its
// GatewayClient and its Configuration with the given pod and external CIDRs.
func writeConfigurationBundle(t *testing.T, pod, external string) string {
	t.Helper()
	peer := manifests.Peer{RemoteClusterID: "cluster-b"}
	// Built unchecked: the bundle may hold a range the policy refuses,
	// which is what render must find.
	conf := &netv1beta1.Configuration{
		TypeMeta:   metav1.TypeMeta{APIVersion: netv1beta1.GroupVersion.String(), Kind: manifests.KindConfiguration},
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-b", Namespace: manifests.TenantNamespace("cluster-b"), Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: "cluster-b"}},
		Spec: netv1beta1.ConfigurationSpec{Remote: netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{
			Pod: []netv1beta1.CIDR{netv1beta1.CIDR(pod)}, External: []netv1beta1.CIDR{netv1beta1.CIDR(external)},
		}}},
	}
	gwc, err := manifests.GatewayClient(manifests.GatewayClientOptions{Peer: peer, Addresses: []string{"172.18.0.3"}, Port: 30851})
	if err != nil {
		t.Fatal(err)
	}
	files, err := InitBundle(gwc)
	if err != nil {
		t.Fatal(err)
	}
	data, err := manifests.Marshal(manifests.FormatYAML, conf)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range files {
		if f.Name == KustomizationFile {
			if f.Data, err = AddResources(f.Data, "configuration.yaml"); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "configuration.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRenderBundleRemapsAsTheController(t *testing.T) {
	info := &clusterinfo.Info{
		ClusterID:    "cluster-a",
		PodCIDRs:     []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")},
		ExternalCIDR: netip.MustParsePrefix("10.70.0.0/16"),
		RoutedPeer:   []netip.Prefix{netip.MustParsePrefix("10.71.0.0/16")},
	}
	remoteCIDRs := func(info *clusterinfo.Info) (pods, ext []any) {
		t.Helper()
		docs, err := RenderBundle(writeConfigurationBundle(t, "10.244.0.0/16", "10.71.0.0/16"), info)
		if err != nil {
			t.Fatal(err)
		}
		var status map[string]any
		for _, m := range docs {
			if m["kind"] == manifests.KindConfiguration {
				status, _ = m["status"].(map[string]any)
			}
		}
		if len(docs) != 2 || status == nil {
			t.Fatalf("%d manifests, want the rendered WgGatewayClient and the Configuration with a status", len(docs))
		}
		remote, _ := status["remote"].(map[string]any)
		cidr, _ := remote["cidr"].(map[string]any)
		pods, _ = cidr["pod"].([]any)
		ext, _ = cidr["external"].([]any)
		return pods, ext
	}
	if pods, ext := remoteCIDRs(info); len(pods) != 1 || pods[0] == "10.244.0.0/16" || len(ext) != 1 || ext[0] != "10.71.0.0/16" {
		t.Errorf("status.remote.cidr = %v, %v: the colliding pod CIDR must be remapped, the free external one in the plan kept", pods, ext)
	}
	// Without the plan, the free range is remapped too.
	noPlan := *info
	noPlan.RoutedPeer = nil
	if pods, ext := remoteCIDRs(&noPlan); len(pods) != 1 || pods[0] != "10.0.0.0/16" || len(ext) != 1 || ext[0] != "10.1.0.0/16" {
		t.Errorf("status.remote.cidr = %v, %v without a plan, want both remapped (10.0.0.0/16, 10.1.0.0/16)", pods, ext)
	}

	// A range the controller refuses is refused here, naming the field.
	_, err := RenderBundle(writeConfigurationBundle(t, "10.244.0.0/16", "8.8.8.0/24"), info)
	if err == nil || !strings.Contains(err.Error(), "spec.remote.cidr.external[0]") {
		t.Errorf("render of a public range: %v, want an error naming spec.remote.cidr.external[0]", err)
	}
}
