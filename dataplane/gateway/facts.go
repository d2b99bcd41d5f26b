package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane"
	"github.com/peerlink/peerlink/dataplane/health"
	"github.com/peerlink/peerlink/dataplane/plan"
	"github.com/peerlink/peerlink/dataplane/resync"
	"github.com/peerlink/peerlink/internal/rangepolicy"
)

// factReader reads what the plan needs from the key directory and the API,
// and watches what it reads.
type factReader struct {
	opts      Options
	client    client.Client
	informers cache.Informers
	log       logr.Logger
	gateway   *gatewayObject
	// follower is, on a client, the server endpoint it follows; nil on a
	// server.
	follower *endpointFollower
	// hosts are the remapped hosts read last from the IP objects.
	hosts []dataplane.IPMapping
}

// liveFacts are the facts of the running agent rather than of the API.
type liveFacts struct {
	// pathMTU is the path MTU measured last; standby is set while this
	// replica does not carry the tunnel; overlay are the overlay facts
	// found at start; endpointTurn counts the times a client moved on to
	// the server's next address, read once the addresses are.
	pathMTU      int
	standby      bool
	overlay      dataplane.GatewayOverlay
	endpointTurn func() int
}

// watch notifies trigger of every change of what gather reads.
func (r *factReader) watch(ctx context.Context, trigger resync.Trigger) error {
	if err := resync.WatchObjects(ctx, r.informers, trigger, r.gateway.newObject(), &netv1beta1.Configuration{}, &netv1beta1.PublicKey{}); err != nil {
		return err
	}
	// The IPs of every namespace are watched apart: an informer that may
	// not list them yet (the controller grants the gateway that right
	// when it makes it) must not hold up the tunnel.
	go func() {
		if err := resync.WatchObjects(ctx, r.informers, trigger, &ipamv1alpha1.IP{}); err != nil && ctx.Err() == nil {
			r.log.Error(err, "remapped hosts are read every resync only")
		}
	}()
	resync.WatchKernel(ctx, r.log, trigger)
	return nil
}

// gather reads the facts of the plan, with the live ones.
func (r *factReader) gather(ctx context.Context, live liveFacts) (dataplane.GatewayFacts, error) {
	f := dataplane.GatewayFacts{
		Role:       r.opts.Role,
		ListenPort: r.opts.ListenPort,
		MTU:        r.opts.MTU,
		PathMTU:    live.pathMTU,
		Standby:    live.standby,
		Keepalive:  r.opts.Keepalive,
		Overlay:    live.overlay,
		// The options are validated once; the plan keeps its own copy.
		LocalRanges:   slices.Clone(r.opts.LocalRanges),
		UnknownSource: r.opts.UnknownSource,
	}
	var err error
	if f.PrivateKey, err = readKey(r.opts.KeyDir, netv1beta1.PrivateKeyField); err != nil {
		return f, err
	}
	if f.NextPrivateKey, err = readNextKey(r.opts.KeyDir, f.PrivateKey); err != nil {
		return f, err
	}

	addresses, port, err := r.gateway.read(ctx, &f)
	if err != nil {
		return f, err
	}
	if f.PeerPublicKey, f.PeerNextPublicKey, err = r.peerKey(ctx); err != nil {
		return f, err
	}
	if f.Remote, err = r.remoteRanges(ctx); err != nil {
		return f, err
	}
	f.IPs = r.remappedHosts(ctx, f.LocalRanges, f.UnknownSource)
	if r.opts.Role == gatewayrole.Client {
		f.Endpoint, err = r.serverEndpoint(ctx, addresses, port, live.endpointTurn())
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

// readKey reads a raw 32-byte WireGuard key from the mounted key Secret.
func readKey(dir, name string) (plan.Key, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return plan.Key{}, resync.Waiting{Reason: fmt.Sprintf("key file %s does not exist yet", path)}
	}
	if err != nil {
		return plan.Key{}, fmt.Errorf("read key file %s: %w", path, err)
	}
	k, err := plan.NewKey(b)
	if err != nil {
		return plan.Key{}, fmt.Errorf("key file %s: %d bytes, want the 32 raw bytes of a WireGuard key", path, len(b))
	}
	return k, nil
}

// readNextKey reads the optional next private key from the mounted key
// Secret; zero when there is none.
func readNextKey(dir string, current plan.Key) (plan.Key, error) {
	k, err := readKey(dir, netv1beta1.NextPrivateKeyField)
	if resync.IsWaiting(err) {
		return plan.Key{}, nil
	}
	if err != nil {
		return plan.Key{}, err
	}
	if k.PublicKey() == current.PublicKey() {
		return plan.Key{}, fmt.Errorf("key file %s: the same key pair as %s", filepath.Join(dir, netv1beta1.NextPrivateKeyField), netv1beta1.PrivateKeyField)
	}
	return k, nil
}

// gatewayObject is the agent's GatewayServer or GatewayClient, as the
// Connection and the imports ConfigMap name it.
type gatewayObject struct {
	opts   Options
	client client.Client

	mu  sync.Mutex
	uid types.UID
	// published is, on a server, the endpoint its status publishes, which
	// the prober announces to the client.
	published health.Endpoint
}

// publishedEndpoint returns the endpoint a server's status published at
// the last read; zero on a client, or before.
func (g *gatewayObject) publishedEndpoint() health.Endpoint {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.published
}

// newObject returns an empty object of the kind of the agent's gateway.
func (g *gatewayObject) newObject() client.Object {
	if g.opts.Role == gatewayrole.Server {
		return &netv1beta1.GatewayServer{}
	}
	return &netv1beta1.GatewayClient{}
}

// ref returns the gateway's kind and UID (empty before it was read, unless
// Options.GatewayUID gave it).
func (g *gatewayObject) ref() (string, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opts.Role == gatewayrole.Server {
		return "GatewayServer", string(g.uid)
	}
	return "GatewayClient", string(g.uid)
}

// read reads the gateway object: the MTU when no flag set it, and a
// client's server endpoint when no flag set it. It also learns the object's
// UID for the Connection.
func (g *gatewayObject) read(ctx context.Context, f *dataplane.GatewayFacts) ([]string, int, error) {
	key := types.NamespacedName{Namespace: g.opts.Namespace, Name: g.opts.Name}
	gw := g.newObject()
	if err := g.client.Get(ctx, key, gw); err != nil {
		kind, _ := g.ref()
		return nil, 0, fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	if uid := gw.GetUID(); uid != "" {
		g.mu.Lock()
		g.uid = uid
		g.mu.Unlock()
	}
	mtu, addresses, port := 0, g.opts.EndpointAddresses, g.opts.EndpointPort
	switch gw := gw.(type) {
	case *netv1beta1.GatewayServer:
		mtu, addresses, port = gw.Spec.MTU, nil, 0
		g.mu.Lock()
		g.published = endpointOf(gw)
		g.mu.Unlock()
	case *netv1beta1.GatewayClient:
		mtu = gw.Spec.MTU
		if len(addresses) == 0 {
			addresses = gw.Spec.Endpoint.Addresses
		}
		if port == 0 {
			port = int(gw.Spec.Endpoint.Resolved().Port)
		}
	}
	if f.MTU == 0 {
		f.MTU = mtu
	}
	return addresses, port, nil
}

// peerKey finds the PublicKey of the peer in the namespace and returns its
// key and its next key (zero when it has none). Several are an error: the
// agent cannot tell which one the peer uses.
func (r *factReader) peerKey(ctx context.Context) (current, next plan.Key, err error) {
	var list netv1beta1.PublicKeyList
	if err := r.client.List(ctx, &list, client.InNamespace(r.opts.Namespace),
		client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: r.opts.RemoteClusterID}); err != nil {
		return current, next, fmt.Errorf("list PublicKeys of cluster %s in namespace %s: %w", r.opts.RemoteClusterID, r.opts.Namespace, err)
	}
	switch len(list.Items) {
	case 0:
		return current, next, resync.Waiting{Reason: fmt.Sprintf("no PublicKey labelled %s=%s in namespace %s", netv1beta1.RemoteClusterIDLabel, r.opts.RemoteClusterID, r.opts.Namespace)}
	case 1:
	default:
		var names []string
		for _, pk := range list.Items {
			names = append(names, pk.Name)
		}
		slices.Sort(names)
		return current, next, fmt.Errorf("the PublicKeys %v in namespace %s are all labelled %s=%s: keep one", names, r.opts.Namespace, netv1beta1.RemoteClusterIDLabel, r.opts.RemoteClusterID)
	}
	return publicKeys(&list.Items[0])
}

// publicKeys reads the key and the optional next key of a PublicKey.
func publicKeys(pk *netv1beta1.PublicKey) (current, next plan.Key, err error) {
	if current, err = plan.NewKey(pk.Spec.PublicKey); err != nil {
		return current, next, fmt.Errorf("spec.publicKey of PublicKey %s/%s: %d bytes, want 32", pk.Namespace, pk.Name, len(pk.Spec.PublicKey))
	}
	if len(pk.Spec.NextPublicKey) == 0 {
		return current, next, nil
	}
	if next, err = plan.NewKey(pk.Spec.NextPublicKey); err != nil {
		return current, next, fmt.Errorf("spec.nextPublicKey of PublicKey %s/%s: %d bytes, want 32", pk.Namespace, pk.Name, len(pk.Spec.NextPublicKey))
	}
	if next == current {
		return current, next, fmt.Errorf("spec.nextPublicKey of PublicKey %s/%s: the same key as spec.publicKey", pk.Namespace, pk.Name)
	}
	return current, next, nil
}

// remoteRanges pairs the peer's real ranges (spec.remote) with their
// remapped counterparts (status.remote). Ranges the controller has not
// remapped yet are left out: traffic to them could not be translated.
func (r *factReader) remoteRanges(ctx context.Context) ([]dataplane.RangeMapping, error) {
	var list netv1beta1.ConfigurationList
	if err := r.client.List(ctx, &list, client.InNamespace(r.opts.Namespace),
		client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: r.opts.RemoteClusterID}); err != nil {
		return nil, fmt.Errorf("list Configurations of cluster %s in namespace %s: %w", r.opts.RemoteClusterID, r.opts.Namespace, err)
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("%d Configurations in namespace %s are labelled %s=%s: keep one", len(list.Items), r.opts.Namespace, netv1beta1.RemoteClusterIDLabel, r.opts.RemoteClusterID)
	}
	return RangeMappings(&list.Items[0])
}

// RangeMappings are the peer's ranges of a Configuration that the
// controller has remapped (Configuration.RemappedRanges), pod ranges then
// external ranges.
func RangeMappings(conf *netv1beta1.Configuration) ([]dataplane.RangeMapping, error) {
	ranges, err := conf.RemappedRanges()
	if err != nil {
		return nil, err
	}
	var out []dataplane.RangeMapping
	for _, r := range ranges {
		out = append(out, dataplane.RangeMapping{Real: r.Real, Remapped: r.Remapped})
	}
	return out, nil
}

// serverEndpoint returns the server endpoint a client sends to, of the
// addresses and port its GatewayClient names and, first, those of the
// endpoint the server announced (endpointFollower): the turn-th that is
// usable, each address counting as one. A client whose pings go
// unanswered takes the next turn, so an announced endpoint that does not
// answer from here costs a few pings before the named one serves again.
func (r *factReader) serverEndpoint(ctx context.Context, addresses []string, port, turn int) (netip.AddrPort, error) {
	if r.follower == nil || len(addresses) == 0 || port < 1 || port > 65535 {
		return resolveEndpoint(ctx, rotate(addresses, turn), port)
	}
	var each []health.Endpoint
	for _, e := range r.follower.endpoints(health.Endpoint{Addresses: addresses, Port: uint16(port)}) {
		for _, a := range e.Addresses {
			each = append(each, health.Endpoint{Addresses: []string{a}, Port: e.Port})
		}
	}
	var errs []error
	for _, e := range rotate(each, turn) {
		ep, err := resolveEndpoint(ctx, e.Addresses, int(e.Port))
		if err == nil {
			return ep, nil
		}
		errs = append(errs, err)
	}
	return netip.AddrPort{}, errors.Join(errs...)
}

// rotate returns s starting at the turn-th, modulo its length, and
// wrapping around.
func rotate[T any](s []T, turn int) []T {
	if len(s) < 2 {
		return s
	}
	i := turn % len(s)
	return append(slices.Clone(s[i:]), s[:i]...)
}

// resolveEndpoint returns the first of a client's server addresses that is
// an address, or a name that resolves to one (its IPv4 addresses first). An address the peer may not name
// (loopback, link-local, unspecified, multicast, broadcast: see
// rangepolicy.CheckServerAddr) is skipped, written or resolved: a name
// the peer chose can resolve anywhere.
func resolveEndpoint(ctx context.Context, addresses []string, port int) (netip.AddrPort, error) {
	if len(addresses) == 0 || port == 0 {
		return netip.AddrPort{}, resync.Waiting{Reason: "the server's endpoint (address and port) is not known yet"}
	}
	if port < 1 || port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("server port %d: must be in 1-65535", port)
	}
	var errs []error
	for _, host := range addresses {
		if ip, err := netip.ParseAddr(host); err == nil {
			if err := rangepolicy.CheckServerAddr(ip); err != nil {
				errs = append(errs, fmt.Errorf("server address %s: %w", host, err))
				continue
			}
			return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
		}
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil || len(ips) == 0 {
			errs = append(errs, fmt.Errorf("resolve server address %s: %w", host, err))
			continue
		}
		slices.SortStableFunc(ips, func(a, b netip.Addr) int { return cmp.Compare(a.Unmap().BitLen(), b.Unmap().BitLen()) })
		for _, ip := range ips {
			ip = ip.Unmap()
			if err := rangepolicy.CheckServerAddr(ip); err != nil {
				errs = append(errs, fmt.Errorf("server address %s resolves to %s: %w", host, ip, err))
				continue
			}
			return netip.AddrPortFrom(ip, uint16(port)), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("no usable server address among %v (port %s): %w", addresses, strconv.Itoa(port), errors.Join(errs...))
}
