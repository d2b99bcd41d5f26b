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

// DetectPodCIDRs derives the pod CIDRs from the ranges the Nodes were
// given (spec.podCIDRs, as kube-controller-manager or the cloud assigns
// them): per address family, the smallest prefix holding all of them,
// widened towards a /16 (IPv4) or /48 (IPv6) as long as it overlaps none of
// the ranges in avoid (the cluster's other ranges). A cluster whose pod
// range is smaller or split must give it instead.
func DetectPodCIDRs(ctx context.Context, r client.Reader, avoid []netip.Prefix) ([]netip.Prefix, error) {
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("pod CIDRs: list nodes: %w", err)
	}
	var v4, v6 []netip.Prefix
	for _, n := range nodes.Items {
		ranges := n.Spec.PodCIDRs
		if len(ranges) == 0 && n.Spec.PodCIDR != "" {
			ranges = []string{n.Spec.PodCIDR}
		}
		for _, s := range ranges {
			p, err := cidr.ParseNetwork(s)
			if err != nil {
				return nil, fmt.Errorf("pod CIDRs: node %s spec.podCIDRs: %w", n.Name, err)
			}
			if p.Addr().Is4() {
				v4 = append(v4, p)
			} else {
				v6 = append(v6, p)
			}
		}
	}
	var out []netip.Prefix
	if len(v4) > 0 {
		out = append(out, widen(cover(v4), widenIPv4, avoid))
	}
	if len(v6) > 0 {
		out = append(out, widen(cover(v6), widenIPv6, avoid))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pod CIDRs: none of the %d nodes has spec.podCIDRs: %w", len(nodes.Items), ErrNotDetected)
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

// DetectServiceCIDR finds the IPv4 service CIDR (the IPv6 one where the
// cluster has no IPv4 range): from the ServiceCIDR objects where the API
// server serves them, otherwise by asking the API server, in a dry run
// that creates nothing, for a Service in namespace with a ClusterIP outside
// any range, and reading the range from its refusal. It returns the source
// it used.
func DetectServiceCIDR(ctx context.Context, c client.Client, namespace string) (netip.Prefix, string, error) {
	p, err := serviceCIDRFromAPI(ctx, c)
	if err == nil {
		return p, SourceServiceCIDRAPI, nil
	}
	if !errors.Is(err, ErrNotDetected) {
		return netip.Prefix{}, "", err
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
		return netip.Prefix{}, "", fmt.Errorf("service CIDR: the API server accepted ClusterIP %s and named no range: %w", serviceCIDRProbe, ErrNotDetected)
	}
	m := allocatorRange.FindStringSubmatch(err.Error())
	if m == nil {
		return netip.Prefix{}, "", fmt.Errorf("service CIDR: a dry-run Service with ClusterIP %s: %w (%v)", serviceCIDRProbe, ErrNotDetected, err)
	}
	p, perr := cidr.ParseNetwork(m[1])
	if perr != nil {
		return netip.Prefix{}, "", fmt.Errorf("service CIDR: the API server named the range %q: %w", m[1], perr)
	}
	return p, SourceServiceAllocator, nil
}

// serviceCIDRFromAPI reads the ranges of the ServiceCIDR objects and
// returns the IPv4 one, or the IPv6 one if there is no IPv4 range.
// ErrNotDetected means the API server serves no ServiceCIDR kind or has no
// such object.
func serviceCIDRFromAPI(ctx context.Context, r client.Reader) (netip.Prefix, error) {
	for _, gvk := range serviceCIDRKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := r.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return netip.Prefix{}, fmt.Errorf("service CIDR: list %s: %w", gvk.GroupVersion(), err)
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
					return netip.Prefix{}, fmt.Errorf("service CIDR: ServiceCIDR %s spec.cidrs: %w", item.GetName(), err)
				}
				found = append(found, p)
			}
		}
		if len(found) == 0 {
			continue
		}
		if i := slices.IndexFunc(found, func(p netip.Prefix) bool { return p.Addr().Is4() }); i >= 0 {
			return found[i], nil
		}
		return found[0], nil
	}
	return netip.Prefix{}, ErrNotDetected
}
