package clusterinfo

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

func TestCoverAndWiden(t *testing.T) {
	for _, tc := range []struct {
		in    []string
		bits  int
		avoid []string
		want  string
	}{
		{[]string{"10.244.0.0/24", "10.244.1.0/24"}, widenIPv4, nil, "10.244.0.0/16"},
		{[]string{"10.244.128.0/24", "10.244.200.0/24"}, widenIPv4, nil, "10.244.0.0/16"},
		// Ranges spanning more than a /16 keep their own cover.
		{[]string{"10.0.0.0/24", "10.8.0.0/24"}, widenIPv4, nil, "10.0.0.0/12"},
		{[]string{"10.42.0.0/16"}, widenIPv4, nil, "10.42.0.0/16"},
		{[]string{"10.40.0.0/14"}, widenIPv4, nil, "10.40.0.0/14"},
		{[]string{"fd00:10:244:1::/64", "fd00:10:244:2::/64"}, widenIPv6, nil, "fd00:10:244::/48"},
		// Widening stops short of the cluster's other ranges.
		{[]string{"10.96.128.0/24", "10.96.129.0/24"}, widenIPv4, []string{"10.96.0.0/17"}, "10.96.128.0/17"},
		{[]string{"10.244.0.0/24"}, widenIPv4, []string{"10.70.0.0/16", "10.244.64.0/18"}, "10.244.0.0/18"},
	} {
		got := widen(cover(cidr.MustPrefixes(tc.in...)), tc.bits, cidr.MustPrefixes(tc.avoid...))
		if got.String() != tc.want {
			t.Errorf("%v: %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestDetect detects the facts of a real API server: the cluster ID from
// the kube-system namespace, the pod CIDRs from Nodes, the service CIDR
// from the ServiceCIDR objects where the API server serves them, else from
// the allocator's refusal of a dry-run Service, which creates nothing.
func TestDetect(t *testing.T) {
	c := testcluster.Start(t, testcluster.WithAPIServerFlag("service-cluster-ip-range", "10.43.0.0/16"))
	ctx := t.Context()

	id, err := DetectClusterID(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	var ns corev1.Namespace
	if err := c.Client.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, &ns); err != nil {
		t.Fatal(err)
	}
	if len(id) != clusterIDLength || !strings.HasPrefix(string(ns.UID), id) {
		t.Errorf("cluster ID %q, want the first %d hex digits of UID %s", id, clusterIDLength, ns.UID)
	}
	if again, _ := DetectClusterID(ctx, c.Client); again != id {
		t.Errorf("cluster ID changed from %q to %q", id, again)
	}

	if _, _, err := DetectPodCIDRs(ctx, c.Client, nil); !errors.Is(err, ErrNotDetected) || !strings.Contains(err.Error(), "give the ranges") {
		t.Errorf("pod CIDRs without nodes: %v, want ErrNotDetected saying what to give", err)
	}
	for name, ranges := range map[string][]string{
		"n1": {"10.244.0.0/24", "fd00:10:244::/64"},
		"n2": {"10.244.1.0/24", "fd00:10:244:1::/64"},
		"n3": nil, // not given a range yet
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: ranges}}
		if len(ranges) > 0 {
			n.Spec.PodCIDR = ranges[0]
		}
		if err := c.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	pods, src, err := DetectPodCIDRs(ctx, c.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := cidr.MustPrefixes("10.244.0.0/16", "fd00:10:244::/48"); !slices.Equal(pods, want) || src != SourceNodes {
		t.Errorf("pod CIDRs %v from %q, want %v from %q", pods, src, want, SourceNodes)
	}

	// API servers from 1.33 on serve the ServiceCIDR kind by default and
	// name their range there; older ones leave the allocator's refusal.
	wantSrc := SourceServiceAllocator
	if _, err := c.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: "networking.k8s.io", Kind: "ServiceCIDR"}); err == nil {
		wantSrc = SourceServiceCIDRAPI
	}
	svc, src, err := DetectServiceCIDRs(ctx, c.Client, metav1.NamespaceDefault)
	if err != nil {
		t.Fatal(err)
	}
	if want := cidr.MustPrefixes("10.43.0.0/16"); !slices.Equal(svc, want) || src != wantSrc {
		t.Errorf("service CIDRs %v from %q, want %v from %q", svc, src, want, wantSrc)
	}
	var list corev1.ServiceList
	if err := c.Client.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if strings.HasPrefix(s.Name, "peerlink-service-cidr-") {
			t.Errorf("the dry run left Service %s/%s", s.Namespace, s.Name)
		}
	}
}

// TestDetectServiceCIDRAPI reads the service CIDRs from the ServiceCIDR
// objects of a dual-stack API server: both, IPv4 first.
func TestDetectServiceCIDRAPI(t *testing.T) {
	c := testcluster.Start(t,
		testcluster.WithAPIServerFlag("service-cluster-ip-range", "10.44.0.0/16,fd96::/112"),
		testcluster.WithAPIServerFlag("feature-gates", "MultiCIDRServiceAllocator=true"),
		testcluster.WithAPIServerFlag("runtime-config", "networking.k8s.io/v1beta1=true"))
	var (
		svc []netip.Prefix
		src string
		err error
	)
	// The API server makes its ServiceCIDR just after it starts serving.
	for range 50 {
		if svc, src, err = DetectServiceCIDRs(t.Context(), c.Client, metav1.NamespaceDefault); err == nil && src == SourceServiceCIDRAPI {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if want := cidr.MustPrefixes("10.44.0.0/16", "fd96::/112"); err != nil || !slices.Equal(svc, want) || src != SourceServiceCIDRAPI {
		t.Errorf("service CIDRs %v from %q (%v), want %v from %q", svc, src, err, want, SourceServiceCIDRAPI)
	}
}

// TestDetectPodCIDRsOfCNIs detects the pod CIDRs of clusters whose Nodes
// have no spec.podCIDRs because the CNI allocates pod addresses itself:
// from Cilium's CiliumNodes, from Calico's enabled IPPools (which win),
// and from the Nodes when they have ranges after all (which win over both).
func TestDetectPodCIDRsOfCNIs(t *testing.T) {
	c, create := cniCluster(t)
	ctx := t.Context()
	detect := func(what string, want []string, wantSrc string) {
		t.Helper()
		got, src, err := DetectPodCIDRs(ctx, c.Client, cidr.MustPrefixes("10.96.0.0/12"))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(got, cidr.MustPrefixes(want...)) || src != wantSrc {
			t.Errorf("%s: pod CIDRs %v from %q, want %v from %q", what, got, src, want, wantSrc)
		}
	}
	// The kinds served, no object: nothing to go by.
	if _, _, err := DetectPodCIDRs(ctx, c.Client, nil); !errors.Is(err, ErrNotDetected) {
		t.Errorf("pod CIDRs with the CNI kinds but no object: %v, want ErrNotDetected", err)
	}
	create("cilium.io/v2", "CiliumNode", "n1", map[string]any{"ipam": map[string]any{"podCIDRs": []any{"10.0.1.0/24"}}})
	create("cilium.io/v2", "CiliumNode", "n2", map[string]any{"ipam": map[string]any{"podCIDRs": []any{"10.0.2.0/24", "fd00:c::/64"}}})
	detect("Cilium's cluster pool", []string{"10.0.0.0/16", "fd00:c::/48"}, SourceCiliumNodes)

	create("crd.projectcalico.org/v1", "IPPool", "default-ipv4-ippool", map[string]any{"cidr": "192.168.0.0/16"})
	create("crd.projectcalico.org/v1", "IPPool", "old", map[string]any{"cidr": "172.20.0.0/16", "disabled": true})
	detect("Calico's IP pools", []string{"192.168.0.0/16"}, SourceCalicoIPPools)

	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.3.0/24", PodCIDRs: []string{"10.244.3.0/24"}}}
	if err := c.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	detect("Nodes with ranges", []string{"10.244.0.0/16"}, SourceNodes)

	create("crd.projectcalico.org/v1", "IPPool", "broken", map[string]any{"cidr": "not a range"})
	if err := c.Client.Delete(ctx, n); err != nil {
		t.Fatal(err)
	}
	if _, _, err := DetectPodCIDRs(ctx, c.Client, nil); err == nil || !strings.Contains(err.Error(), "IPPool broken") {
		t.Errorf("an IPPool with a bad cidr: %v, want an error naming it", err)
	}
}

// TestNodePodCIDRs reads each node's pod ranges from Cilium's CiliumNodes
// and Calico's confirmed block affinities, and nothing where neither kind
// is served.
func TestNodePodCIDRs(t *testing.T) {
	c, create := cniCluster(t)
	ctx := t.Context()
	create("cilium.io/v2", "CiliumNode", "n1", map[string]any{"ipam": map[string]any{"podCIDRs": []any{"10.0.1.0/24"}}})
	create("cilium.io/v2", "CiliumNode", "other", map[string]any{"ipam": map[string]any{"podCIDRs": []any{"10.0.9.0/24"}}})
	block := func(name, node, cidr, state, deleted string) {
		create("crd.projectcalico.org/v1", "BlockAffinity", name, map[string]any{"node": node, "cidr": cidr, "state": state, "deleted": deleted})
	}
	block("n2-a", "n2", "192.168.5.0/26", "confirmed", "false")
	block("n2-b", "n2", "192.168.5.64/26", "confirmed", "false")
	block("n2-pending", "n2", "192.168.6.0/26", "pending", "false")
	block("n2-deleted", "n2", "192.168.6.64/26", "confirmed", "true")
	got, err := NodePodCIDRs(ctx, c.Client, []string{"n1", "n2", "n3"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]netip.Prefix{
		"n1": cidr.MustPrefixes("10.0.1.0/24"),
		"n2": cidr.MustPrefixes("192.168.5.0/26", "192.168.5.64/26"),
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("NodePodCIDRs = %v, want %v", got, want)
	}

	bare := testcluster.Start(t)
	if got, err := NodePodCIDRs(ctx, bare.Client, []string{"n1"}); err != nil || len(got) != 0 {
		t.Errorf("NodePodCIDRs without the CNI kinds = %v, %v; want nothing", got, err)
	}
}

// cniCluster starts an API server serving the kinds of the CNIs detection
// reads, and returns it with a function that creates an object of one.
func cniCluster(t *testing.T) (*testcluster.Cluster, func(apiVersion, kind, name string, spec map[string]any)) {
	c := testcluster.Start(t, testcluster.WithCRDs(
		cniCRD("crd.projectcalico.org", "v1", "IPPool", "ippools", apiextensionsv1.ClusterScoped),
		cniCRD("crd.projectcalico.org", "v1", "BlockAffinity", "blockaffinities", apiextensionsv1.ClusterScoped),
		cniCRD("cilium.io", "v2", "CiliumNode", "ciliumnodes", apiextensionsv1.ClusterScoped)))
	return c, func(apiVersion, kind, name string, spec map[string]any) {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": name}, "spec": spec}}
		if err := c.Client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// cniCRD is a CustomResourceDefinition of a CNI's kind, as much of it as
// detection reads: any spec.
func cniCRD(group, version, kind, plural string, scope apiextensionsv1.ResourceScope) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}
