package clusterinfo

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
// from the allocator's refusal of a dry-run Service, which creates nothing.
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

	if _, err := DetectPodCIDRs(ctx, c.Client, nil); !errors.Is(err, ErrNotDetected) {
		t.Errorf("pod CIDRs without nodes: %v, want ErrNotDetected", err)
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
	pods, err := DetectPodCIDRs(ctx, c.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := cidr.MustPrefixes("10.244.0.0/16", "fd00:10:244::/48"); !slices.Equal(pods, want) {
		t.Errorf("pod CIDRs %v, want %v", pods, want)
	}

	svc, src, err := DetectServiceCIDR(ctx, c.Client, metav1.NamespaceDefault)
	if err != nil {
		t.Fatal(err)
	}
	if svc != netip.MustParsePrefix("10.43.0.0/16") || src != SourceServiceAllocator {
		t.Errorf("service CIDR %s from %q, want 10.43.0.0/16 from %q", svc, src, SourceServiceAllocator)
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

// TestDetectServiceCIDRAPI reads the service CIDR from the ServiceCIDR
// objects of an API server that serves them.
func TestDetectServiceCIDRAPI(t *testing.T) {
	c := testcluster.Start(t,
		testcluster.WithAPIServerFlag("service-cluster-ip-range", "10.44.0.0/16"),
		testcluster.WithAPIServerFlag("feature-gates", "MultiCIDRServiceAllocator=true"),
		testcluster.WithAPIServerFlag("runtime-config", "networking.k8s.io/v1beta1=true"))
	var (
		svc netip.Prefix
		src string
		err error
	)
	// The API server makes its ServiceCIDR just after it starts serving.
	for range 50 {
		if svc, src, err = DetectServiceCIDR(t.Context(), c.Client, metav1.NamespaceDefault); err == nil && src == SourceServiceCIDRAPI {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || svc != netip.MustParsePrefix("10.44.0.0/16") || src != SourceServiceCIDRAPI {
		t.Errorf("service CIDR %s from %q (%v), want 10.44.0.0/16 from %q", svc, src, err, SourceServiceCIDRAPI)
	}
}
