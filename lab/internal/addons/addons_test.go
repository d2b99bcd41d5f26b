package addons

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/peerlink/peerlink/testkit/testenv"
)

// decodeAll decodes a multi-document manifest, failing t on an object
// without kind or name.
func decodeAll(t *testing.T, what string, data []byte) []unstructured.Unstructured {
	t.Helper()
	var out []unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for n := 0; ; n++ {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if n == 0 || !errors.Is(err, io.EOF) {
				t.Fatalf("%s: object %d: %v", what, n, err)
			}
			return out
		}
		if obj.Object == nil {
			continue
		}
		if obj.GetKind() == "" || obj.GetName() == "" {
			t.Errorf("%s: object %d has no kind or name: %v", what, n, obj.Object)
		}
		out = append(out, obj)
	}
}

// findPinned skips t under -short, as it downloads what; otherwise it
// returns what find reads of the modules the repository pins.
func findPinned[T any](t *testing.T, what string, find func(ctx context.Context, repo string) (T, error)) T {
	t.Helper()
	if testing.Short() {
		t.Skip("downloads " + what + ": skipped under -short")
	}
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	found, err := find(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// checkObjects fails t for each namespaced object of objs outside ns, and
// for each kind of want that no object has.
func checkObjects(t *testing.T, objs []unstructured.Unstructured, ns string, want ...string) {
	t.Helper()
	var kinds []string
	for _, obj := range objs {
		kinds = append(kinds, obj.GetKind())
		if got := obj.GetNamespace(); got != "" && got != ns {
			t.Errorf("%s %s in namespace %s, want %s", obj.GetKind(), obj.GetName(), got, ns)
		}
	}
	for _, k := range want {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s among %v", k, kinds)
		}
	}
}

// TestFlux builds the Flux controllers' install manifests from the modules
// the repository pins: every object lands in flux-system, and each
// controller's image is the lab registry's.
func TestFlux(t *testing.T) {
	c := findPinned(t, "the Flux modules", FindFluxControllers)
	out, err := Flux(c, "172.30.1.1:5000")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, "flux", out)
	checkObjects(t, objs, FluxNamespace, "Namespace", "CustomResourceDefinition", "ClusterRoleBinding", "Service")
	var images []string
	cancels := false
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			for _, ctr := range containers {
				image, _, _ := unstructured.NestedString(ctr.(map[string]any), "image")
				images = append(images, image)
				args, _, _ := unstructured.NestedStringSlice(ctr.(map[string]any), "args")
				if slices.Contains(args, fluxCancelHealthCheck) {
					cancels = obj.GetName() == "kustomize-controller"
				}
			}
		}
	}
	if !cancels {
		t.Errorf("kustomize-controller runs without %s", fluxCancelHealthCheck)
	}
	slices.Sort(images)
	if want := []string{"172.30.1.1:5000/lab/kustomize-controller:latest", "172.30.1.1:5000/lab/source-controller:latest"}; !slices.Equal(images, want) {
		t.Errorf("images %q, want %q", images, want)
	}
	if _, err := Flux(FluxControllers{SourceController: c.SourceController}, "r:5000"); err == nil {
		t.Error("Flux without kustomize-controller's module built")
	}
}

func TestRender(t *testing.T) {
	p := Params{
		Registry:         "172.30.1.1:5000",
		PodCIDR:          netip.MustParsePrefix("10.245.0.0/16"),
		DNSIP:            netip.MustParseAddr("10.97.0.10"),
		ClusterDomain:    "cluster.local",
		ClustersetDomain: "clusterset.local",
		FlannelRunDir:    "/lab/c1/flannel",
	}
	for name, want := range map[string][]string{
		CoreDNS: {"clusterIP: 10.97.0.10", "image: 172.30.1.1:5000/lab/coredns:latest", "kubernetes cluster.local clusterset.local in-addr.arpa", "multicluster clusterset.local"},
		Flannel: {`"Network": "10.245.0.0/16"`, "path: \"/lab/c1/flannel\"", "image: 172.30.1.1:5000/lab/flanneld:latest"},
	} {
		out, err := Render(name, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: no %q in\n%s", name, w, out)
			}
		}
		decodeAll(t, name, out)
	}
	if _, err := Render("weave", p); err == nil {
		t.Error("an unknown add-on rendered")
	}
	if out, _ := Render(CoreDNS, p); strings.Contains(string(out), "clusterIPs") {
		t.Errorf("a single-stack DNS Service lists clusterIPs:\n%s", out)
	}
}

// A dual-stack cluster's DNS Service has an address of each family, the
// one pods are given first.
func TestRenderDualStackDNS(t *testing.T) {
	p := Params{
		Registry: "172.30.1.1:5000", ClusterDomain: "cluster.local", ClustersetDomain: "clusterset.local",
		DNSIP:  netip.MustParseAddr("10.96.0.10"),
		DNSIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd96:1::a")},
	}
	out, err := Render(CoreDNS, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range decodeAll(t, CoreDNS, out) {
		if obj.GetKind() != "Service" {
			continue
		}
		ips, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "clusterIPs")
		policy, _, _ := unstructured.NestedString(obj.Object, "spec", "ipFamilyPolicy")
		if !slices.Equal(ips, []string{"10.96.0.10", "fd96:1::a"}) || policy != "RequireDualStack" {
			t.Errorf("DNS Service clusterIPs %q, ipFamilyPolicy %q", ips, policy)
		}
		return
	}
	t.Fatalf("no Service in\n%s", out)
}

// TestMetalLB builds MetalLB's install manifests from the module the
// repository pins: everything lands in metallb-system, the images are the
// lab registry's, and the speaker runs on the node's network.
func TestMetalLB(t *testing.T) {
	module := findPinned(t, "the MetalLB module", FindMetalLB)
	out, err := MetalLB(module, "172.30.1.1:5000")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, "metallb", out)
	checkObjects(t, objs, MetalLBNamespace, "Namespace", "CustomResourceDefinition", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "Service")
	var images []string
	hostNetwork := false
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Deployment", "DaemonSet":
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			for _, ctr := range containers {
				image, _, _ := unstructured.NestedString(ctr.(map[string]any), "image")
				images = append(images, image)
			}
			if obj.GetKind() == "DaemonSet" {
				hostNetwork, _, _ = unstructured.NestedBool(obj.Object, "spec", "template", "spec", "hostNetwork")
			}
		}
	}
	slices.Sort(images)
	if want := []string{"172.30.1.1:5000/lab/metallb-controller:latest", "172.30.1.1:5000/lab/metallb-speaker:latest"}; !slices.Equal(images, want) {
		t.Errorf("images %q, want %q", images, want)
	}
	if !hostNetwork {
		t.Error("the speaker does not run on the node's network")
	}
	if _, err := MetalLB("", "r:5000"); err == nil {
		t.Error("MetalLB without its module built")
	}
}

func TestMetalLBPool(t *testing.T) {
	out, err := MetalLBPool(netip.MustParseAddr("172.30.11.240"), netip.MustParseAddr("172.30.11.254"))
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, "metallb pool", out)
	if len(objs) != 2 || objs[0].GetKind() != "IPAddressPool" || objs[1].GetKind() != "L2Advertisement" {
		t.Fatalf("want an IPAddressPool and an L2Advertisement, got\n%s", out)
	}
	if addrs, _, _ := unstructured.NestedStringSlice(objs[0].Object, "spec", "addresses"); !slices.Equal(addrs, []string{"172.30.11.240-172.30.11.254"}) {
		t.Errorf("pool addresses %q", addrs)
	}
	if pools, _, _ := unstructured.NestedStringSlice(objs[1].Object, "spec", "ipAddressPools"); !slices.Equal(pools, []string{objs[0].GetName()}) {
		t.Errorf("the L2Advertisement announces %q, not the pool %s", pools, objs[0].GetName())
	}
	if _, err := MetalLBPool(netip.MustParseAddr("172.30.11.254"), netip.MustParseAddr("172.30.11.240")); err == nil {
		t.Error("a pool whose last address comes before its first rendered")
	}
}
