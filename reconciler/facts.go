package reconciler

import (
	"context"
	"errors"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/ipam"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/templates"
)

// ClusterFacts are what the controller knows of its own cluster: its ID and
// the ranges it uses, which the IPAM must never hand to a peer. They come
// from the flags of `peerlink-agent controller` (named beside each field);
// the errors of Detect and Validate name fields (field.Error), which the
// command maps to its flags.
type ClusterFacts struct {
	// Info are the facts the controller publishes in the cluster-info
	// ConfigMap: the cluster ID (--cluster-id), the pod CIDRs (--pod-cidr),
	// the service CIDR (--service-cidr), the external CIDR, which holds the
	// addresses of non-pod endpoints as the peers see them
	// (--external-cidr), the internal CIDR, set aside for the overlay
	// between nodes and gateways and never given to a peer
	// (--internal-cidr), the allowlist of the ranges a peer may
	// declare (--allowed-peer-cidr), and the address plan for peers, the
	// only place a peer's range is routed as it is (--routed-peer-cidr).
	clusterinfo.Info
	// ReservedCIDRs are further ranges in use here (--reserved-cidr).
	ReservedCIDRs []netip.Prefix
	// Namespace is the controller's namespace, where it publishes the
	// cluster-info ConfigMap and holds its leader lease (--namespace).
	Namespace string
	// Pools are the ranges remapped peer CIDRs are taken from, searched in
	// order (--ipam-pool). Empty means ipam.DefaultPools.
	Pools []netip.Prefix
	// GatewayImage is the image the default gateway templates run, the
	// controller's own image; empty keeps the templates' own.
	GatewayImage string
	// ImportNamespaces are the namespaces that take the services peers
	// export besides those labelled mcs.ImportNamespaceLabel
	// (--import-namespace); "*" is every namespace.
	ImportNamespaces []string
	// ServiceLimits bound what one peer may export (--max-imported-services,
	// --max-endpoints-per-service); zero values take mcs.DefaultLimits.
	ServiceLimits mcs.Limits
	// AllowedTemplateKinds are kinds gateway templates may render besides
	// WgGatewayServer and WgGatewayClient (--allowed-template-kind); never
	// a built-in Kubernetes kind.
	AllowedTemplateKinds []schema.GroupVersionKind
}

// namedRange is a local range and the field it comes from.
type namedRange struct {
	field  string
	prefix netip.Prefix
}

// ranges lists the local ranges that are set, each named by its field.
func (f ClusterFacts) ranges() []namedRange {
	var out []namedRange
	add := func(field string, ps ...netip.Prefix) {
		for _, p := range ps {
			if p.IsValid() {
				out = append(out, namedRange{field, p})
			}
		}
	}
	add("PodCIDRs", f.PodCIDRs...)
	add("ServiceCIDR", f.ServiceCIDR)
	add("ExternalCIDR", f.ExternalCIDR)
	add("InternalCIDR", f.InternalCIDR)
	add("ReservedCIDRs", f.ReservedCIDRs...)
	return out
}

// Detect fills in the cluster ID, the pod CIDRs and the service CIDR that
// were not given, from what the cluster's API says (see the Detect
// functions of package clusterinfo), and records in Sources where each of
// the three comes from. Given facts always win. c writes only dry runs; r
// reads without a cache, as Detect runs before the manager starts.
func (f *ClusterFacts) Detect(ctx context.Context, c client.Client, r client.Reader) error {
	f.Sources = map[string]string{
		clusterinfo.KeyClusterID:   clusterinfo.SourceGiven,
		clusterinfo.KeyPodCIDRs:    clusterinfo.SourceGiven,
		clusterinfo.KeyServiceCIDR: clusterinfo.SourceGiven,
	}
	var errs []error
	if f.ClusterID == "" {
		id, err := clusterinfo.DetectClusterID(ctx, r)
		if err != nil {
			errs = append(errs, field.Invalid("ClusterID", nil, "not given: %w", err))
		}
		f.ClusterID, f.Sources[clusterinfo.KeyClusterID] = id, clusterinfo.SourceNamespaceUID
	}
	if !f.ServiceCIDR.IsValid() {
		ps, src, err := clusterinfo.DetectServiceCIDRs(ctx, c, f.Namespace)
		if err != nil {
			errs = append(errs, field.Invalid("ServiceCIDR", nil, "not given: %w", err))
		}
		if len(ps) > 0 {
			// The service CIDR of the other family, in a dual-stack
			// cluster, is no less local: a peer's range must not be
			// remapped onto it.
			f.ServiceCIDR = ps[0]
			for _, p := range ps[1:] {
				if !slices.Contains(f.ReservedCIDRs, p) {
					f.ReservedCIDRs = append(f.ReservedCIDRs, p)
				}
			}
		}
		f.Sources[clusterinfo.KeyServiceCIDR] = src
	}
	// After the service CIDR: the pod CIDRs are widened up to the other
	// local ranges, never over them.
	if len(f.PodCIDRs) == 0 {
		ps, src, err := clusterinfo.DetectPodCIDRs(ctx, r, f.Taken())
		if err != nil {
			errs = append(errs, field.Invalid("PodCIDRs", nil, "not given: %w", err))
		}
		// Both families are peered: a dual-stack cluster publishes its
		// IPv4 and its IPv6 pod ranges, an IPv6-only cluster its IPv6 ones.
		f.PodCIDRs, f.Sources[clusterinfo.KeyPodCIDRs] = ps, src
	}
	return errors.Join(errs...)
}

// Taken returns every local range: the ranges a peer's CIDR must not collide
// with to be kept as is.
func (f ClusterFacts) Taken() []netip.Prefix {
	rs := f.ranges()
	out := make([]netip.Prefix, len(rs))
	for i, r := range rs {
		out[i] = r.prefix
	}
	return out
}

// Validate checks that the facts are complete and consistent: a valid
// cluster ID, a namespace, at least one pod CIDR and a service CIDR (given
// or detected), every range a valid network, and no two local ranges
// overlapping. Errors name the fields involved.
func (f ClusterFacts) Validate() error { return f.validate(true) }

// ValidateGiven checks the facts as the flags give them, before Detect: the
// cluster ID, the pod CIDRs and the service CIDR may be missing.
func (f ClusterFacts) ValidateGiven() error { return f.validate(false) }

func (f ClusterFacts) validate(complete bool) error {
	var errs []error
	const detect = "required: not given, and not detected"
	switch {
	case f.ClusterID != "":
		if err := clusterinfo.ValidateClusterID(f.ClusterID); err != nil {
			errs = append(errs, field.Invalid("ClusterID", f.ClusterID, "%w", err))
		}
	case complete:
		errs = append(errs, field.Invalid("ClusterID", nil, detect))
	}
	errs = append(errs, field.Required("Namespace", f.Namespace != ""))
	if complete && len(f.PodCIDRs) == 0 {
		errs = append(errs, field.Invalid("PodCIDRs", nil, detect))
	}
	if complete && !f.ServiceCIDR.IsValid() {
		errs = append(errs, field.Invalid("ServiceCIDR", nil, detect))
	}
	errs = append(errs, field.Required("ExternalCIDR", f.ExternalCIDR.IsValid()), field.Required("InternalCIDR", f.InternalCIDR.IsValid()))
	rs := f.ranges()
	for _, r := range rs {
		if r.prefix != r.prefix.Masked() {
			errs = append(errs, field.Invalid(r.field, r.prefix, "%w (the network is %s)", cidr.ErrHostBits, r.prefix.Masked()))
		}
	}
	if i, j, ok := cidr.FirstOverlap(f.Taken()); ok {
		errs = append(errs, field.Conflict(rs[i].field, rs[i].prefix, "overlaps", rs[j].field, rs[j].prefix, "local ranges must be disjoint"))
	}
	if _, err := ipam.New(ipam.PoolsOrDefault(f.Pools), nil); err != nil {
		errs = append(errs, field.Invalid("Pools", nil, "%w", err))
	}
	for _, k := range f.AllowedTemplateKinds {
		if templates.IsBuiltinGroup(k.Group) {
			errs = append(errs, field.Invalid("AllowedTemplateKinds", k, "a kind built into Kubernetes is never rendered from a template"))
		}
	}
	if err := rangepolicy.Validate(f.Info.AllowedPeer); err != nil {
		errs = append(errs, field.Invalid("AllowedPeer", nil, "%w", err))
	}
	if err := rangepolicy.ValidateRouted(f.Info.RoutedPeer); err != nil {
		errs = append(errs, field.Invalid("RoutedPeer", nil, "%w", err))
	}
	return errors.Join(errs...)
}
