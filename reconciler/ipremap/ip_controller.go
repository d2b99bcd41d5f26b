package ipremap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/ipam"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

// exhaustedRetry is how often an IP waiting for a free address is tried
// again: the deletion of another IP frees one, and no watch tells this one.
const exhaustedRetry = time.Minute

// Reconciler gives each IP an address of the external CIDR.
//
// Allocation reads every IP from the API server rather than the cache, and
// one allocation at a time, so that two IPs created together never get the
// same address: the cache may not yet show the address given a moment
// before.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	// Defaults to the manager's client.
	Client client.Client
	// Reader reads from the API server. Defaults to the manager's.
	Reader client.Reader
	// Options are what the reconciler knows of this cluster.
	Options Options

	// mu makes one allocation at a time.
	mu sync.Mutex
}

// Reconcile checks one IP and gives it its address.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	flow := outcome.Flow[*ipamv1alpha1.IP]{
		New:        func() *ipamv1alpha1.IP { return &ipamv1alpha1.IP{} },
		Conditions: func(ip *ipamv1alpha1.IP) *netv1beta1.CommonStatus { return &ip.Status.CommonStatus },
		Status:     func(ip *ipamv1alpha1.IP) any { return ip.Status },
	}
	return flow.Reconcile(ctx, r.Client, req.NamespacedName, r.reconcile)
}

// reconcile checks the IP's spec and allocates its address. An IP that
// cannot be served holds no address.
func (r *Reconciler) reconcile(ctx context.Context, ip *ipamv1alpha1.IP) (outcome.Outcome, error) {
	local, err := r.checkSpec(ip)
	if err != nil {
		if outcome.IsStall(err) {
			ip.Status.IP, ip.Status.CIDR = "", ""
		}
		return outcome.Outcome{}, err
	}
	addr, err := r.allocate(ctx, ip)
	if err != nil {
		if outcome.IsStall(err) {
			ip.Status.IP, ip.Status.CIDR = "", ""
		}
		return outcome.Outcome{}, err
	}
	ip.Status.IP = netv1beta1.IP(addr.String())
	ip.Status.CIDR = netv1beta1.CIDR(r.Options.ExternalCIDR.String())
	if err := r.syncService(ctx, ip); err != nil {
		return outcome.Outcome{}, err
	}
	return outcome.Ready(fmt.Sprintf("%s is reached by peers at %s of their view of %s", local, addr, r.Options.ExternalCIDR)), nil
}

// checkSpec returns the local address of ip, or stalls it naming the field.
func (r *Reconciler) checkSpec(ip *ipamv1alpha1.IP) (netip.Addr, error) {
	if ref := ip.Spec.NetworkRef; ref != nil {
		return netip.Addr{}, outcome.Stall(ipamv1alpha1.ReasonNetworkRefUnsupported,
			"IP %s/%s: spec.networkRef (%s/%s): peerlink allocates from the external CIDR only; remove the field",
			ip.Namespace, ip.Name, ref.Namespace, ref.Name)
	}
	bad := func(format string, args ...any) error {
		return outcome.Stall(ipamv1alpha1.ReasonInvalidIP, "IP %s/%s: spec.ip %q: %s", ip.Namespace, ip.Name, ip.Spec.IP, fmt.Sprintf(format, args...))
	}
	a, err := netip.ParseAddr(string(ip.Spec.IP))
	if err != nil || !a.Is4() {
		return netip.Addr{}, bad("not an IPv4 address")
	}
	if err := rangepolicy.CheckRoutable(netip.PrefixFrom(a, 32)); err != nil {
		return netip.Addr{}, bad("%v", err)
	}
	if r.Options.ExternalCIDR.Contains(a) {
		return netip.Addr{}, bad("in the external CIDR %s, where remapped addresses are allocated", r.Options.ExternalCIDR)
	}
	for _, p := range r.Options.PodCIDRs {
		if p.Contains(a) {
			return netip.Addr{}, bad("in the pod CIDR %s: peers reach pods at their own addresses", p)
		}
	}
	return a, nil
}

// allocate returns the address of ip: the one it holds when no older IP
// holds it too, else the lowest free one. It stalls ip when the external
// CIDR is full or MaxIPs others hold an address.
func (r *Reconciler) allocate(ctx context.Context, ip *ipamv1alpha1.IP) (netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var list ipamv1alpha1.IPList
	if err := r.Reader.List(ctx, &list); err != nil {
		return netip.Addr{}, fmt.Errorf("list IPs: %w", err)
	}
	keep, _ := netip.ParseAddr(string(ip.Status.IP))
	taken := map[netip.Addr]bool{}
	lost := false
	for i := range list.Items {
		other := &list.Items[i]
		a, err := netip.ParseAddr(string(other.Status.IP))
		if other.UID == ip.UID || err != nil {
			continue
		}
		taken[a] = true
		// Of two IPs that claim one address (a restored backup), the
		// older keeps it.
		lost = lost || (a == keep && older(other, ip))
	}
	if keep.IsValid() && !lost {
		delete(taken, keep)
	} else {
		keep = netip.Addr{}
	}
	if held := len(taken); !keep.IsValid() && held >= ipamv1alpha1.MaxIPs {
		return netip.Addr{}, outcome.StallRetry(exhaustedRetry, ipamv1alpha1.ReasonExhausted,
			"IP %s/%s: %d IPs hold an address already, the most a cluster remaps: delete one", ip.Namespace, ip.Name, held)
	}
	a, err := ipam.AllocateAddress(r.Options.ExternalCIDR, taken, keep)
	if errors.Is(err, ipam.ErrNoAddress) {
		return netip.Addr{}, outcome.StallRetry(exhaustedRetry, ipamv1alpha1.ReasonExhausted, "IP %s/%s: %v: delete an IP", ip.Namespace, ip.Name, err)
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("IP %s/%s: %w", ip.Namespace, ip.Name, err)
	}
	return a, nil
}

// older orders IPs by creation time, then namespace, then name.
func older(a, b *ipamv1alpha1.IP) bool {
	return cmp.Or(
		a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time),
		strings.Compare(a.Namespace, b.Namespace),
		strings.Compare(a.Name, b.Name)) < 0
}

// SetupWithManager registers the reconciler with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	if !r.Options.ExternalCIDR.IsValid() {
		return errors.New("ip reconciler: external CIDR: missing")
	}
	// Status updates, the controller's own writes, are not worth a
	// reconcile: only spec changes are.
	changes := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	// A Service or EndpointSlice of a serviceTemplate deleted or changed
	// by hand is made again.
	return ctrl.NewControllerManagedBy(mgr).
		Named("ip").
		For(&ipamv1alpha1.IP{}, changes).
		Owns(&corev1.Service{}, builder.OnlyMetadata).
		Owns(&discoveryv1.EndpointSlice{}, builder.OnlyMetadata).
		Complete(r)
}
