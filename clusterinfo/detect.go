package clusterinfo

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/internal/cidr"
)

// Where a fact comes from, as Sources records it.
const (
	// SourceGiven is a fact the admin set (a flag of the controller, a key
	// of the facts ConfigMap).
	SourceGiven = "given"
	// SourceNamespaceUID is a cluster ID derived from the UID of the
	// kube-system namespace, which lives as long as the cluster.
	SourceNamespaceUID = "kube-system namespace UID"
	// SourceNodes are pod CIDRs covering the Nodes' spec.podCIDRs.
	SourceNodes = "Nodes' spec.podCIDRs"
	// SourceCalicoIPPools are the enabled IPPools of Calico's own IPAM.
	SourceCalicoIPPools = "Calico IPPools"
	// SourceCiliumNodes are pod CIDRs covering the blocks of Cilium's
	// cluster pool, its CiliumNodes' spec.ipam.podCIDRs.
	SourceCiliumNodes = "CiliumNodes' spec.ipam.podCIDRs"
	// SourceServiceCIDRAPI is a service CIDR read from the ServiceCIDR
	// objects of the API server (networking.k8s.io).
	SourceServiceCIDRAPI = "ServiceCIDR API"
	// SourceServiceAllocator is a service CIDR the API server named when
	// it refused, in a dry run, a ClusterIP outside its range.
	SourceServiceAllocator = "API server's ClusterIP allocator"
)

// ErrNotDetected says a fact could not be found in the cluster: it must be
// given.
var ErrNotDetected = errors.New("not detected")

// clusterIDLength is how much of the kube-system namespace UID a detected
// cluster ID keeps: its first group of hex digits.
const clusterIDLength = 8

// DetectClusterID derives a cluster ID from the UID of the kube-system
// namespace: its first eight hex digits. The namespace exists in every
// cluster and keeps its UID for the cluster's life, so the ID is stable
// across restarts and reinstalls of peerlink.
func DetectClusterID(ctx context.Context, r client.Reader) (string, error) {
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, &ns); err != nil {
		return "", fmt.Errorf("cluster ID: read namespace %s: %w", metav1.NamespaceSystem, err)
	}
	id := strings.ToLower(strings.ReplaceAll(string(ns.UID), "-", ""))
	if len(id) < clusterIDLength {
		return "", fmt.Errorf("cluster ID: namespace %s has UID %q: %w", metav1.NamespaceSystem, ns.UID, ErrNotDetected)
	}
	id = id[:clusterIDLength]
	if err := ValidateClusterID(id); err != nil {
		return "", fmt.Errorf("cluster ID from namespace %s: %w", metav1.NamespaceSystem, err)
	}
	return id, nil
}

// Minimum prefix lengths of detected pod CIDRs: the Nodes' ranges are
// widened to a /16 (IPv4) or /48 (IPv6) holding them, the size a cluster's
// pod range usually has, so that nodes joining later fall inside it.
const (
	widenIPv4 = 16
	widenIPv6 = 48
)

// DetectPodCIDRs finds the pod CIDRs and says where it found them. First
// from the ranges the Nodes were given (spec.podCIDRs, as
// kube-controller-manager or the cloud assigns them): per address family,
// the smallest prefix holding all of them, widened towards a /16 (IPv4) or
// /48 (IPv6) as long as it overlaps none of the ranges in avoid (the
// cluster's other ranges). A CNI with its own IPAM leaves the Nodes
// without ranges; then the ranges it allocates from: Calico's enabled
// IPPools as they are, or the CiliumNodes' spec.ipam.podCIDRs (Cilium's
// cluster pool), covered and widened like the Nodes'. A cluster whose pod
// range is none of these must give it: the error says how.
func DetectPodCIDRs(ctx context.Context, r client.Reader, avoid []netip.Prefix) ([]netip.Prefix, string, error) {
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return nil, "", fmt.Errorf("pod CIDRs: list nodes: %w", err)
	}
	var ranges []netip.Prefix
	for _, n := range nodes.Items {
		given := n.Spec.PodCIDRs
		if len(given) == 0 && n.Spec.PodCIDR != "" {
			given = []string{n.Spec.PodCIDR}
		}
		for _, s := range given {
			p, err := cidr.ParseNetwork(s)
			if err != nil {
				return nil, "", fmt.Errorf("pod CIDRs: node %s spec.podCIDRs: %w", n.Name, err)
			}
			ranges = append(ranges, p)
		}
	}
	if len(ranges) > 0 {
		return coverFamilies(ranges, avoid), SourceNodes, nil
	}
	pools, err := cniRanges(ctx, r, calicoIPPools)
	if err != nil || len(pools) > 0 {
		return pools, SourceCalicoIPPools, err
	}
	blocks, err := cniRanges(ctx, r, ciliumNodes)
	if err != nil || len(blocks) > 0 {
		return coverFamilies(blocks, avoid), SourceCiliumNodes, err
	}
	return nil, "", fmt.Errorf("pod CIDRs: none of the %d nodes has spec.podCIDRs, and no Calico IPPool or CiliumNode names a pod range: "+
		"give the ranges the CNI hands pod addresses out of (its IP pools; kubectl get pods -A -o wide shows addresses in them): %w", len(nodes.Items), ErrNotDetected)
}

// coverFamilies returns, per address family of ranges, IPv4 first, the
// smallest prefix holding all of that family's ranges, widened as
// DetectPodCIDRs says.
func coverFamilies(ranges []netip.Prefix, avoid []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, fam := range []struct {
		is4  bool
		bits int
	}{{true, widenIPv4}, {false, widenIPv6}} {
		var of []netip.Prefix
		for _, p := range ranges {
			if p.Addr().Is4() == fam.is4 {
				of = append(of, p)
			}
		}
		if len(of) > 0 {
			out = append(out, widen(cover(of), fam.bits, avoid))
		}
	}
	return out
}

// A cniSource is where a CNI with its own IPAM keeps its pod ranges: the
// objects of a kind, the ranges one of them holds (none when it is not in
// use) and, where the kind says, the node that allocates from them.
type cniSource struct {
	list   schema.GroupVersionKind
	ranges func(obj map[string]any) []string
	node   func(obj map[string]any) string
}

var (
	// calicoIPPools are Calico's IP pools, in its CRD API (the one
	// Calico's own API server serves too); a disabled pool allocates
	// nothing.
	calicoIPPools = cniSource{
		list: schema.GroupVersionKind{Group: "crd.projectcalico.org", Version: "v1", Kind: "IPPoolList"},
		ranges: func(obj map[string]any) []string {
			if disabled, _, _ := unstructured.NestedBool(obj, "spec", "disabled"); disabled {
				return nil
			}
			s, _, _ := unstructured.NestedString(obj, "spec", "cidr")
			return []string{s}
		},
	}
	// calicoBlocks are the blocks of Calico's pools that each node holds
	// (its block affinities): a node's pods take their addresses from its
	// confirmed blocks.
	calicoBlocks = cniSource{
		list: schema.GroupVersionKind{Group: "crd.projectcalico.org", Version: "v1", Kind: "BlockAffinityList"},
		ranges: func(obj map[string]any) []string {
			state, _, _ := unstructured.NestedString(obj, "spec", "state")
			deleted, _, _ := unstructured.NestedString(obj, "spec", "deleted")
			if state != "confirmed" || deleted == "true" {
				return nil
			}
			s, _, _ := unstructured.NestedString(obj, "spec", "cidr")
			return []string{s}
		},
		node: func(obj map[string]any) string {
			s, _, _ := unstructured.NestedString(obj, "spec", "node")
			return s
		},
	}
	// ciliumNodes are Cilium's nodes, named after the Nodes, which hold the
	// blocks of its cluster pool that each node allocates from.
	ciliumNodes = cniSource{
		list: schema.GroupVersionKind{Group: "cilium.io", Version: "v2", Kind: "CiliumNodeList"},
		ranges: func(obj map[string]any) []string {
			s, _, _ := unstructured.NestedStringSlice(obj, "spec", "ipam", "podCIDRs")
			return s
		},
		node: func(obj map[string]any) string {
			s, _, _ := unstructured.NestedString(obj, "metadata", "name")
			return s
		},
	}
)

// cniRanges lists the ranges of src; none when the cluster does not serve
// its kind.
func cniRanges(ctx context.Context, r client.Reader, src cniSource) ([]netip.Prefix, error) {
	var out []netip.Prefix
	err := eachCNIRange(ctx, r, src, func(_ map[string]any, p netip.Prefix) { out = append(out, p) })
	return out, err
}

// eachCNIRange calls add with every range of every object of src, and
// nothing when the cluster does not serve its kind.
func eachCNIRange(ctx context.Context, r client.Reader, src cniSource, add func(obj map[string]any, p netip.Prefix)) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(src.list)
	if err := r.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod CIDRs: list %s: %w", src.list.GroupKind(), err)
	}
	for _, item := range list.Items {
		for _, s := range src.ranges(item.Object) {
			p, err := cidr.ParseNetwork(s)
			if err != nil {
				return fmt.Errorf("pod CIDRs: %s %s: %w", item.GetKind(), item.GetName(), err)
			}
			add(item.Object, p)
		}
	}
	return nil
}

// NodePodCIDRs reads the pod ranges of the named nodes where a CNI with
// its own IPAM keeps them, for Nodes without spec.podCIDRs: Cilium's
// CiliumNodes (spec.ipam.podCIDRs) and Calico's confirmed block
// affinities (spec.node, spec.cidr). A node found in neither is left out;
// a kind the cluster does not serve is passed over.
func NodePodCIDRs(ctx context.Context, r client.Reader, nodes []string) (map[string][]netip.Prefix, error) {
	out := map[string][]netip.Prefix{}
	for _, src := range []cniSource{ciliumNodes, calicoBlocks} {
		err := eachCNIRange(ctx, r, src, func(obj map[string]any, p netip.Prefix) {
			if n := src.node(obj); slices.Contains(nodes, n) {
				out[n] = append(out[n], p)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cover returns the smallest prefix holding every prefix of ps, which are
// all of one address family.
func cover(ps []netip.Prefix) netip.Prefix {
	c := ps[0]
	for _, p := range ps[1:] {
		bits := min(c.Bits(), p.Bits())
		for bits > 0 {
			a, _ := c.Addr().Prefix(bits)
			b, _ := p.Addr().Prefix(bits)
			if a == b {
				break
			}
			bits--
		}
		c, _ = c.Addr().Prefix(bits)
	}
	return c
}

// widen returns the largest prefix holding p, at most as large as a
// prefix of length bits, that overlaps none of avoid; p itself when it is
// larger than that already.
func widen(p netip.Prefix, bits int, avoid []netip.Prefix) netip.Prefix {
	for p.Bits() > bits {
		w, _ := p.Addr().Prefix(p.Bits() - 1)
		if slices.ContainsFunc(avoid, w.Overlaps) {
			break
		}
		p = w
	}
	return p
}

// serviceCIDRKinds are the versions of the ServiceCIDR kind, newest first:
// v1 from Kubernetes 1.33, v1beta1 in 1.31 and 1.32 where enabled.
var serviceCIDRKinds = []schema.GroupVersionKind{
	{Group: "networking.k8s.io", Version: "v1", Kind: "ServiceCIDRList"},
	{Group: "networking.k8s.io", Version: "v1beta1", Kind: "ServiceCIDRList"},
}

// defaultServiceCIDR names the ServiceCIDR the API server makes from its
// --service-cluster-ip-range.
const defaultServiceCIDR = "kubernetes"

// boolOrder orders false before true.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// serviceCIDRProbe is the ClusterIP a dry-run Service asks for to learn the
// service range from the refusal: an address of TEST-NET-1 (RFC 5737), in
// no cluster's service range.
const serviceCIDRProbe = "192.0.2.1"

// allocatorRange finds the range in the API server's refusal of a ClusterIP
// outside it ("... The range of valid IPs is 10.96.0.0/12").
var allocatorRange = regexp.MustCompile(`range of valid IPs is ([0-9A-Fa-f.:/]+)`)

// DetectServiceCIDRs finds the service CIDRs, the IPv4 one first (the
// one a single service CIDR names, where there is one), then those of the
// other family of a dual-stack cluster: from the ServiceCIDR objects where
// the API server serves them, otherwise by asking the API server, in a dry
// run that creates nothing, for a Service in namespace with a ClusterIP
// outside any range, and reading the range from its refusal (which names
// the primary range alone). It returns the source it used.
func DetectServiceCIDRs(ctx context.Context, c client.Client, namespace string) ([]netip.Prefix, string, error) {
	ps, err := serviceCIDRsFromAPI(ctx, c)
	if err == nil {
		return ps, SourceServiceCIDRAPI, nil
	}
	if !errors.Is(err, ErrNotDetected) {
		return nil, "", err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "peerlink-service-cidr-"},
		Spec: corev1.ServiceSpec{
			ClusterIP: serviceCIDRProbe,
			Ports:     []corev1.ServicePort{{Port: 80}},
		},
	}
	err = c.Create(ctx, svc, client.DryRunAll)
	if err == nil {
		return nil, "", fmt.Errorf("service CIDR: the API server accepted ClusterIP %s and named no range: %w", serviceCIDRProbe, ErrNotDetected)
	}
	m := allocatorRange.FindStringSubmatch(err.Error())
	if m == nil {
		return nil, "", fmt.Errorf("service CIDR: a dry-run Service with ClusterIP %s: %w (%v)", serviceCIDRProbe, ErrNotDetected, err)
	}
	p, perr := cidr.ParseNetwork(m[1])
	if perr != nil {
		return nil, "", fmt.Errorf("service CIDR: the API server named the range %q: %w", m[1], perr)
	}
	return []netip.Prefix{p}, SourceServiceAllocator, nil
}

// serviceCIDRsFromAPI reads the ranges of the ServiceCIDR objects, the
// IPv4 ones first, each family in the order of the objects.
// ErrNotDetected means the API server serves no ServiceCIDR kind or has no
// such object.
func serviceCIDRsFromAPI(ctx context.Context, r client.Reader) ([]netip.Prefix, error) {
	for _, gvk := range serviceCIDRKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := r.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("service CIDR: list %s: %w", gvk.GroupVersion(), err)
		}
		// The range the API server was started with first: the
		// ServiceCIDR it keeps under this name.
		slices.SortStableFunc(list.Items, func(a, b unstructured.Unstructured) int {
			return boolOrder(a.GetName() != defaultServiceCIDR, b.GetName() != defaultServiceCIDR)
		})
		var found []netip.Prefix
		for _, item := range list.Items {
			ranges, _, _ := unstructured.NestedStringSlice(item.Object, "spec", "cidrs")
			for _, s := range ranges {
				p, err := cidr.ParseNetwork(s)
				if err != nil {
					return nil, fmt.Errorf("service CIDR: ServiceCIDR %s spec.cidrs: %w", item.GetName(), err)
				}
				found = append(found, p)
			}
		}
		if len(found) == 0 {
			continue
		}
		slices.SortStableFunc(found, func(a, b netip.Prefix) int { return boolOrder(!a.Addr().Is4(), !b.Addr().Is4()) })
		return slices.Compact(found), nil
	}
	return nil, ErrNotDetected
}
