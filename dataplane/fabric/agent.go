package fabric

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/kernel"
	"github.com/peerlink/peerlink/dataplane/overlay"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/resync"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/internal/kube"
)

// Labels of an active gateway pod.
const (
	GatewayAppLabel = "app.kubernetes.io/name"
	GatewayAppValue = "peerlink-gateway"
)

// Options configure the fabric agent; the command line sets them. Of the
// options both agents take, Namespace holds the cluster-info ConfigMap,
// NodeIP is required (gateways and other nodes send this node overlay
// packets there), and MTU is the overlay link's (0: the MTU of the node's
// link less the encapsulation).
type Options struct {
	dataplane.AgentOptions
	// NodeName is the node the agent runs on.
	NodeName string
	// GatewayNamespace limits the gateways to one namespace; empty: all.
	GatewayNamespace string
	// CleanupOnExit removes the overlay link, routes, rules and nftables
	// table when the agent stops. Off, they stay for the next agent (a
	// rollout, a drain, a restart) and traffic to the peers goes on
	// meanwhile; on is for uninstalling.
	CleanupOnExit bool
}

// Validate reports options that cannot work, each error a field.Error
// (field.WithFlags names the flags).
func (o Options) Validate() error {
	errs := []error{field.Required("NodeName", o.NodeName != ""), field.Required("NodeIP", o.NodeIP.IsValid())}
	return errors.Join(append(errs, o.AgentOptions.Check()...)...)
}

// Agent runs the fabric of one node. It is a controller-runtime Runnable.
type Agent struct {
	opts   Options
	client client.Client
	// reader reads without a cache the kinds of CNIs that may not be
	// served (clusterinfo.NodePodCIDRs).
	reader    client.Reader
	informers cache.Informers
	log       logr.Logger

	kernel  *kernel.Stage
	mtu     int
	trigger resync.Trigger
	outcome *resync.Outcome
	// skipped are the gateways the last plan left out, logged when they
	// change.
	skipped []dataplane.SkippedGateway
	// cniErr is the last error reading the pod ranges a CNI keeps, logged
	// when it changes.
	cniErr string
	// lastActive is when each peer last had an active gateway pod, kept
	// for HandOverGrace after it went: its ranges are handing over until
	// then.
	lastActive map[peerKey]time.Time
}

// New returns an agent reading the API through c (and reader, without a
// cache), notified by informers.
func New(opts Options, c client.Client, reader client.Reader, informers cache.Informers, log logr.Logger) (*Agent, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Agent{
		opts: opts, client: c, reader: reader, informers: informers, log: log,
		trigger: resync.NewTrigger(),
		outcome: resync.NewOutcome(log, "not configuring the node yet", "sync the node; retrying"),
	}, nil
}

// Ready is the readiness check: the last sync succeeded.
func (a *Agent) Ready(r *http.Request) error { return a.outcome.Ready(r) }

// Start runs the agent until ctx ends. What it created stays in place, for
// the next agent to adopt, unless CleanupOnExit is set.
func (a *Agent) Start(ctx context.Context) error {
	if err := a.initKernel(); err != nil {
		return err
	}
	defer a.kernel.Close()
	if err := resync.WatchObjects(ctx, a.informers, a.trigger, &corev1.Pod{}, &netv1beta1.Configuration{}, &corev1.ConfigMap{},
		&netv1beta1.GatewayServer{}, &netv1beta1.GatewayClient{}, &corev1.Node{}, &ipamv1alpha1.IP{}); err != nil {
		return err
	}
	resync.WatchKernel(ctx, a.log, a.trigger)
	resync.Tick(ctx, a.trigger, a.opts.ResyncInterval)
	for {
		select {
		case <-ctx.Done():
			if a.opts.CleanupOnExit {
				a.cleanup()
			} else {
				a.log.Info("stopping; the overlay link, routes, rules and nftables table stay for the next agent")
			}
			return nil
		case <-a.trigger:
		}
		a.sync(ctx)
	}
}

func (a *Agent) initKernel() error {
	var err error
	if a.kernel, err = kernel.Open(a.opts.Overlay, a.log); err != nil {
		return err
	}
	a.mtu = a.opts.MTU
	if a.mtu == 0 {
		underlay, err := linkMTU(a.kernel.Handle(), a.opts.NodeIP)
		if err != nil {
			return err
		}
		a.mtu = underlay - overlay.Overhead
	}
	kind := a.kernel.Overlay
	a.log.Info("overlay", "kind", kind, "port", kind.Port(), "nodeIP", a.opts.NodeIP, "mtu", a.mtu)
	return nil
}

// linkMTU is the MTU of the link that holds addr.
func linkMTU(h *netlink.Handle, addr netip.Addr) (int, error) {
	links, err := h.LinkList()
	if err != nil {
		return 0, fmt.Errorf("list links: %w", err)
	}
	for _, l := range links {
		addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == addr {
				return l.Attrs().MTU, nil
			}
		}
	}
	return 0, fmt.Errorf("--node-ip %s is not an address of this node's network namespace", addr)
}

func (a *Agent) sync(ctx context.Context) {
	facts, err := a.gatherFacts(ctx)
	var p dataplane.FabricPlan
	if err == nil {
		if p, err = dataplane.PlanFabric(facts); err == nil {
			a.reportSkipped(p.Skipped)
			err = a.kernel.Apply(p.NetNS, nil)
		}
	}
	if err == nil {
		err = a.publishSubnets(ctx)
	}
	recordSync(p, len(facts.Gateways), err, time.Now())
	a.outcome.Record(err)
}

// reportSkipped logs the gateways a plan left out when they change: each
// is one peer whose routes this node does not install until its facts are
// fixed, while every other peer's are.
func (a *Agent) reportSkipped(skipped []dataplane.SkippedGateway) {
	if slices.Equal(skipped, a.skipped) {
		return
	}
	a.skipped = skipped
	for _, s := range skipped {
		a.log.Error(errors.New(s.Reason), "gateway left out of this node's routes", "gateway", s.Name)
	}
}

// reportCNIError logs, when it changes, why the pod ranges of the nodes
// without spec.podCIDRs could not be read.
func (a *Agent) reportCNIError(err error, nodes []string) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg == a.cniErr {
		return
	}
	a.cniErr = msg
	if err != nil {
		a.log.Error(err, "pod ranges of nodes without spec.podCIDRs not read: the overlay routes none of their pods", "nodes", nodes)
	}
}

// gatherFacts reads the cluster's ranges, the active gateway pods and their
// peers' remapped ranges.
func (a *Agent) gatherFacts(ctx context.Context) (dataplane.FabricFacts, error) {
	f := dataplane.FabricFacts{Node: a.opts.NodeIP, OverlayKind: a.kernel.Overlay, OverlayMTU: a.mtu}
	info, err := clusterinfo.Read(ctx, a.client, a.opts.Namespace)
	if errors.Is(err, clusterinfo.ErrNotPublished) {
		return f, resync.Waiting{Reason: err.Error()}
	}
	if err != nil {
		return f, err
	}
	if !info.ExternalCIDR.IsValid() {
		return f, fmt.Errorf("ConfigMap %s/%s: data.%s is empty", a.opts.Namespace, clusterinfo.Name, clusterinfo.KeyExternalCIDR)
	}
	f.PodCIDRs = info.PodCIDRs
	ext := info.ExternalCIDR
	f.UnknownSource = dataplane.UnknownSource(ext)

	var opts []client.ListOption
	if a.opts.GatewayNamespace != "" {
		opts = append(opts, client.InNamespace(a.opts.GatewayNamespace))
	}
	var pods corev1.PodList
	podOpts := append(slices.Clone(opts), client.MatchingLabels{GatewayAppLabel: GatewayAppValue, netv1beta1.ActiveGatewayLabel: "true"})
	if err := a.client.List(ctx, &pods, podOpts...); err != nil {
		return f, fmt.Errorf("list gateway pods: %w", err)
	}
	var confs netv1beta1.ConfigurationList
	if err := a.client.List(ctx, &confs, opts...); err != nil {
		return f, fmt.Errorf("list Configurations: %w", err)
	}
	records, err := a.gatewayRecords(ctx, opts)
	if err != nil {
		return f, err
	}
	f.Gateways = a.gateways(pods.Items, confs.Items, records)
	var nodes corev1.NodeList
	if err := a.client.List(ctx, &nodes); err != nil {
		return f, fmt.Errorf("list nodes: %w", err)
	}
	var cni map[string][]netip.Prefix
	if missing := rangeless(nodes.Items); len(missing) > 0 {
		// What the CNI keeps may be broken; the peers' routes must still
		// follow their gateways, so it costs those nodes their routes only.
		cni, err = clusterinfo.NodePodCIDRs(ctx, a.reader, missing)
		a.reportCNIError(err, missing)
	}
	f.Nodes = fabricNodes(nodes.Items, cni, plan.FamilyOf(a.opts.NodeIP))
	var ips ipamv1alpha1.IPList
	if err := a.client.List(ctx, &ips); err != nil {
		return f, fmt.Errorf("list IPs: %w", err)
	}
	f.Masquerade = masqueraded(ips.Items)
	return f, nil
}

// masqueraded are the real addresses of the IPs that ask for masquerade
// and have their remapped address: their gateway translates them.
func masqueraded(ips []ipamv1alpha1.IP) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		if ip.Spec.Masquerade == nil || !*ip.Spec.Masquerade || ip.Status.IP == "" {
			continue
		}
		if a, err := netip.ParseAddr(string(ip.Spec.IP)); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// fabricNodes are the nodes with their InternalIP of family fam (the
// overlay's, this node's address's) and their pod ranges: their
// spec.podCIDRs or, for a node without them, the ranges its CNI keeps for
// it (cni, by node name). A node without either has no pods this node
// could route to.
func fabricNodes(nodes []corev1.Node, cni map[string][]netip.Prefix, fam plan.Family) []dataplane.FabricNode {
	var out []dataplane.FabricNode
	for _, n := range nodes {
		var fn dataplane.FabricNode
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && plan.FamilyOf(ip) == fam {
				fn.Address = ip
				break
			}
		}
		for _, c := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				fn.PodCIDRs = append(fn.PodCIDRs, p)
			}
		}
		if len(n.Spec.PodCIDRs) == 0 {
			fn.PodCIDRs = cni[n.Name]
		}
		if fn.Address.IsValid() && len(fn.PodCIDRs) > 0 {
			out = append(out, fn)
		}
	}
	return out
}

// rangeless names the nodes without spec.podCIDRs: a CNI with its own IPAM
// (Calico's, Cilium's cluster pool) keeps their ranges.
func rangeless(nodes []corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		if len(n.Spec.PodCIDRs) == 0 {
			out = append(out, n.Name)
		}
	}
	return out
}

// gatewayRecord is what the controller recorded of a peer's gateway: the
// active pod it chose and published in status.internalEndpoint (nil while
// none), and the ServiceAccount its pods run as, gw-<rendered gateway>.
type gatewayRecord struct {
	published *netv1beta1.InternalGatewayEndpoint
	account   string
}

// gatewayRecords reads, for each peer, its gateway's record from the
// status of its GatewayServer or GatewayClient.
func (a *Agent) gatewayRecords(ctx context.Context, opts []client.ListOption) (map[peerKey]gatewayRecord, error) {
	out := map[peerKey]gatewayRecord{}
	add := func(m metav1.ObjectMeta, ep *netv1beta1.InternalGatewayEndpoint, rendered *corev1.ObjectReference) {
		id := m.Labels[netv1beta1.RemoteClusterIDLabel]
		if id == "" {
			return
		}
		var r gatewayRecord
		if ep != nil && ep.IP != nil && ep.Node != nil {
			r.published = ep
		}
		if rendered != nil && rendered.Name != "" {
			r.account = netv1beta1.GatewayObjectPrefix + rendered.Name
		}
		out[peerKey{m.Namespace, id}] = r
	}
	var servers netv1beta1.GatewayServerList
	if err := a.client.List(ctx, &servers, opts...); err != nil {
		return nil, fmt.Errorf("list GatewayServers: %w", err)
	}
	for _, g := range servers.Items {
		add(g.ObjectMeta, g.Status.InternalEndpoint, g.Status.ServerRef)
	}
	var clients netv1beta1.GatewayClientList
	if err := a.client.List(ctx, &clients, opts...); err != nil {
		return nil, fmt.Errorf("list GatewayClients: %w", err)
	}
	for _, g := range clients.Items {
		add(g.ObjectMeta, g.Status.InternalEndpoint, g.Status.ClientRef)
	}
	return out, nil
}

// peerKey identifies a peer within a namespace.
type peerKey struct{ namespace, clusterID string }

// activePod chooses the pod that carries a peer's traffic among those
// labelled active for it. Labels alone are not enough: anyone who may
// create a pod in the namespace may copy them. A pod counts when it is the
// one the controller published, or when it runs as the gateway's own
// ServiceAccount: such a pod holds the gateway's key and Lease rights
// already, and the replica that takes the Lease over labels itself active
// at once, so a failover needs no controller. The published pod comes
// first while it is still labelled active; otherwise the choice is the
// controller's rule (kube.ActivePod).
func activePod(pods []corev1.Pod, rec gatewayRecord) *corev1.Pod {
	var trusted []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.HostIP == "" {
			continue
		}
		if ep := rec.published; ep != nil && string(*ep.IP) == p.Status.PodIP && *ep.Node == p.Spec.NodeName {
			return &p
		}
		if rec.account != "" && p.Spec.ServiceAccountName == rec.account {
			trusted = append(trusted, p)
		}
	}
	return kube.ActivePod(trusted)
}

// gateways pairs each peer's active gateway pod (see activePod) with the
// remapped ranges of the peer's Configuration in the same namespace. A
// remapped peer without such a pod comes last, without an address, and
// handing over if it had one less than HandOverGrace ago.
func (a *Agent) gateways(pods []corev1.Pod, confs []netv1beta1.Configuration, records map[peerKey]gatewayRecord) []dataplane.FabricGateway {
	ranges := map[peerKey][]netip.Prefix{}
	for _, c := range confs {
		id := c.Labels[netv1beta1.RemoteClusterIDLabel]
		if id == "" || c.Status.Remote == nil {
			continue
		}
		var rs []netip.Prefix
		for _, s := range append(slices.Clone(c.Status.Remote.CIDR.Pod), c.Status.Remote.CIDR.External...) {
			p, err := cidr.ParseNetwork(string(s))
			if err != nil {
				a.log.Info("skipping a remapped range", "configuration", c.Namespace+"/"+c.Name, "range", s, "error", err.Error())
				continue
			}
			rs = append(rs, p)
		}
		ranges[peerKey{c.Namespace, id}] = rs
	}
	byPeer := map[peerKey][]corev1.Pod{}
	for _, p := range pods {
		if k := (peerKey{p.Namespace, p.Labels[netv1beta1.RemoteClusterIDLabel]}); k.clusterID != "" {
			byPeer[k] = append(byPeer[k], p)
		}
	}
	var chosen []*corev1.Pod
	for k, ps := range byPeer {
		if p := activePod(ps, records[k]); p != nil {
			chosen = append(chosen, p)
		}
	}
	slices.SortFunc(chosen, func(x, y *corev1.Pod) int {
		if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	seen := map[peerKey]bool{}
	var out []dataplane.FabricGateway
	now := time.Now()
	lastActive := map[peerKey]time.Time{}
	for _, p := range chosen {
		podIP, err1 := netip.ParseAddr(p.Status.PodIP)
		hostIP, err2 := netip.ParseAddr(p.Status.HostIP)
		if err1 != nil || err2 != nil {
			continue
		}
		k := peerKey{p.Namespace, p.Labels[netv1beta1.RemoteClusterIDLabel]}
		seen[k] = true
		lastActive[k] = now
		out = append(out, dataplane.FabricGateway{
			Name:    p.Namespace + "/" + p.Name,
			Address: podIP,
			Node:    hostIP,
			Local:   p.Spec.NodeName == a.opts.NodeName,
			Ranges:  ranges[k],
		})
	}
	for _, c := range confs {
		k := peerKey{c.Namespace, c.Labels[netv1beta1.RemoteClusterIDLabel]}
		if rs, ok := ranges[k]; ok && !seen[k] {
			seen[k] = true
			g := dataplane.FabricGateway{Name: c.Namespace + "/" + c.Name, Ranges: rs}
			if last, ok := a.lastActive[k]; ok && now.Sub(last) < dataplane.HandOverGrace {
				// Until the grace ends, when a sync makes the ranges
				// unreachable unless a pod took over.
				g.HandingOver, lastActive[k] = true, last
				time.AfterFunc(last.Add(dataplane.HandOverGrace).Sub(now), a.trigger.Notify)
			}
			out = append(out, g)
		}
	}
	a.lastActive = lastActive
	return out
}

// cleanup removes the nftables table, routes, rules and the overlay link.
func (a *Agent) cleanup() {
	if err := a.kernel.Remove(dataplane.FabricOwned()); err != nil {
		a.log.Error(err, "clean up")
		return
	}
	a.log.Info("removed the overlay link, routes, rules and nftables table")
}
