package peering

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/mcs/store"
)

// Description is what a cluster knows of itself and its peers: what
// `peerlink info -o yaml` prints. Its clusterID and network parts are also
// accepted by `render --cluster-info`.
type Description struct {
	ClusterID string      `json:"clusterID"`
	Network   NetworkInfo `json:"network"`
	Peers     []PeerInfo  `json:"peers"`
}

// NetworkInfo are the cluster's own ranges, and the allowlist its
// controller holds peers' ranges to.
type NetworkInfo struct {
	PodCIDRs     []string `json:"podCIDRs"`
	ServiceCIDR  string   `json:"serviceCIDR,omitempty"`
	ExternalCIDR string   `json:"externalCIDR,omitempty"`
	InternalCIDR string   `json:"internalCIDR,omitempty"`
	// AllowedPeerCIDRs is the allowlist in force, the default included.
	AllowedPeerCIDRs []string `json:"allowedPeerCIDRs,omitempty"`
	// RoutedPeerCIDRs is the address plan for peers: their ranges inside
	// it are routed as they are; none when every peer range is remapped.
	RoutedPeerCIDRs []string `json:"routedPeerCIDRs,omitempty"`
}

// PeerInfo is what the cluster holds for one peer.
type PeerInfo struct {
	ClusterID  string          `json:"clusterID"`
	Network    PeerNetwork     `json:"network"`
	PublicKey  string          `json:"publicKey,omitempty"`
	Connection *ConnectionInfo `json:"connection,omitempty"`
	// Services are the services exchanged with the peer (Multi-Cluster
	// Services API): those this cluster exports to it and those it
	// exports here, as namespace/name.
	Services *ServicesInfo `json:"services,omitempty"`
}

// ServicesInfo are the services exchanged with one peer.
type ServicesInfo struct {
	Exported []string `json:"exported"`
	Imported []string `json:"imported"`
}

// PeerNetwork is the network of a peering: the peer's Configuration and
// this cluster's gateway for it (network.gateway), each nil while absent.
type PeerNetwork struct {
	Configuration *ConfigurationInfo `json:"configuration,omitempty"`
	Gateway       *GatewayInfo       `json:"gateway,omitempty"`
}

// ConfigurationInfo is a peer's Configuration: its real ranges and how
// this cluster sees them.
type ConfigurationInfo struct {
	Name          string  `json:"name"`
	Ready         bool    `json:"ready"`
	State         string  `json:"state"`
	PodCIDRs      []Remap `json:"podCIDRs"`
	ExternalCIDRs []Remap `json:"externalCIDRs,omitempty"`
}

// Remap is one range of a peer: as the peer has it and as it is reached
// from here (equal when it needed no remapping, empty while not allocated).
type Remap struct {
	CIDR     string `json:"cidr"`
	Remapped string `json:"remapped,omitempty"`
}

// GatewayInfo is the cluster's gateway for a peer.
type GatewayInfo struct {
	Role      string   `json:"role"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Addresses []string `json:"addresses,omitempty"`
	Port      int32    `json:"port,omitempty"`
	MTU       int      `json:"mtu,omitempty"`
	Ready     bool     `json:"ready"`
	State     string   `json:"state"`
}

// ConnectionInfo is the tunnel's state as the gateway reports it.
type ConnectionInfo struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Latency string `json:"latency,omitempty"`
	// PathMTU is the largest packet the gateway's probes saw cross the
	// tunnel; 0 before the first measurement.
	PathMTU int32 `json:"pathMTU,omitempty"`
	// PeerMTU is the tunnel MTU the peer's gateway announces; 0 while
	// unknown.
	PeerMTU int32 `json:"peerMTU,omitempty"`
	// MTUMismatch is the message of the MTUMismatch condition while it is
	// True: the peer's gateway announces another MTU than this side's.
	MTUMismatch string `json:"mtuMismatch,omitempty"`
	// Message is, while the tunnel is not Connected, what the gateway
	// says of why (the Ready condition's message): a client names the
	// server's endpoint it sends to and how to tell whether it moved.
	Message string `json:"message,omitempty"`
	// PeerView is how the peer reaches this cluster's ranges, as its
	// gateway announces through the tunnel: each of this cluster's ranges
	// (cidr) with the one the peer reaches it at (remapped); none while
	// unknown.
	PeerView []Remap `json:"peerView,omitempty"`
	// FollowedEndpoint is, on a client, the server's endpoint its gateway
	// follows because the server announced it moved, where its
	// GatewayClient names another (Over); nil while it follows none.
	FollowedEndpoint *netv1beta1.FollowedEndpoint `json:"followedEndpoint,omitempty"`
}

// Describe reads the cluster's facts, published in peerlinkNamespace, and
// every peering object.
func Describe(ctx context.Context, cl client.Reader, peerlinkNamespace string) (*Description, error) {
	info, err := ReadClusterInfo(ctx, cl, peerlinkNamespace)
	if err != nil {
		return nil, err
	}
	doc := &Description{ClusterID: info.ClusterID, Network: NetworkInfo{PodCIDRs: prefixStrings(info.PodCIDRs)}}
	if info.ServiceCIDR.IsValid() {
		doc.Network.ServiceCIDR = info.ServiceCIDR.String()
	}
	if info.ExternalCIDR.IsValid() {
		doc.Network.ExternalCIDR = info.ExternalCIDR.String()
	}
	if info.InternalCIDR.IsValid() {
		doc.Network.InternalCIDR = info.InternalCIDR.String()
	}
	doc.Network.AllowedPeerCIDRs = prefixStrings(info.PeerPolicy().AllowedRanges())
	doc.Network.RoutedPeerCIDRs = prefixStrings(info.RoutedPeer)

	var confs netv1beta1.ConfigurationList
	var servers netv1beta1.GatewayServerList
	var clients netv1beta1.GatewayClientList
	var keys netv1beta1.PublicKeyList
	var conns netv1beta1.ConnectionList
	for _, l := range []client.ObjectList{&confs, &servers, &clients, &keys, &conns} {
		if err := cl.List(ctx, l); err != nil {
			return nil, fmt.Errorf("list %T: %w", l, err)
		}
	}
	peers := map[string]*PeerInfo{}
	peer := func(labels map[string]string) *PeerInfo {
		id := labels[netv1beta1.RemoteClusterIDLabel]
		if id == "" {
			return nil
		}
		if peers[id] == nil {
			peers[id] = &PeerInfo{ClusterID: id}
		}
		return peers[id]
	}
	for i := range confs.Items {
		c := &confs.Items[i]
		if p := peer(c.Labels); p != nil {
			p.Network.Configuration = configurationInfo(c)
		}
	}
	connection := func(ns, gateway string) *ConnectionInfo {
		for _, c := range conns.Items {
			if c.Namespace == ns && c.Name == manifests.GatewayObjectName(gateway) {
				return connectionInfo(&c)
			}
		}
		return nil
	}
	for i := range servers.Items {
		s := &servers.Items[i]
		if p := peer(s.Labels); p != nil {
			gw := &GatewayInfo{Role: string(gatewayrole.Server), Name: s.Name, Namespace: s.Namespace, MTU: s.Spec.MTU}
			if ep := s.Status.Endpoint; ep != nil {
				gw.Addresses, gw.Port = ep.Addresses, ep.Port
			}
			gw.Ready, gw.State = ConditionState(s.Generation, s.Status.CommonStatus)
			p.Network.Gateway, p.Connection = gw, connection(s.Namespace, s.Name)
		}
	}
	for i := range clients.Items {
		c := &clients.Items[i]
		if p := peer(c.Labels); p != nil {
			gw := &GatewayInfo{Role: string(gatewayrole.Client), Name: c.Name, Namespace: c.Namespace, MTU: c.Spec.MTU,
				Addresses: c.Spec.Endpoint.Addresses, Port: c.Spec.Endpoint.Resolved().Port}
			gw.Ready, gw.State = ConditionState(c.Generation, c.Status.CommonStatus)
			p.Network.Gateway, p.Connection = gw, connection(c.Namespace, c.Name)
		}
	}
	for i := range keys.Items {
		k := &keys.Items[i]
		if p := peer(k.Labels); p != nil {
			p.PublicKey = manifests.ObjectRef(k.Namespace, k.Name)
		}
	}
	for id, p := range peers {
		if p.Network.Configuration == nil {
			continue
		}
		ns, _, _ := strings.Cut(p.Network.Configuration.Name, "/")
		if p.Services, err = exchangedServices(ctx, cl, ns); err != nil {
			return nil, fmt.Errorf("peer %s: %w", id, err)
		}
	}
	doc.Peers = []PeerInfo{}
	for _, id := range slices.Sorted(maps.Keys(peers)) {
		doc.Peers = append(doc.Peers, *peers[id])
	}
	return doc, nil
}

// exchangedServices reads the services exchanged through a tenant
// namespace; nil when none were.
func exchangedServices(ctx context.Context, cl client.Reader, ns string) (*ServicesInfo, error) {
	info := &ServicesInfo{Exported: []string{}, Imported: []string{}}
	found := false
	for _, side := range []struct {
		name, role string
		dst        *[]string
	}{{mcs.ExportsConfigMap, mcs.ExportsRole, &info.Exported}, {mcs.ImportsConfigMap, mcs.ImportsRole, &info.Imported}} {
		stored, err := store.Read(ctx, cl, ns, side.name, side.role)
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read configmap %s/%s: %w", ns, side.name, err)
		}
		set, _, err := mcs.DecodeShards(stored.Shards, mcs.DefaultLimits, time.Now())
		if err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %w", ns, side.name, err)
		}
		found = true
		for _, s := range set.Sorted() {
			*side.dst = append(*side.dst, s.Key.String())
		}
	}
	if !found {
		return nil, nil
	}
	return info, nil
}

// configurationInfo describes a peer's Configuration.
func configurationInfo(c *netv1beta1.Configuration) *ConfigurationInfo {
	n := &ConfigurationInfo{Name: manifests.ObjectRef(c.Namespace, c.Name)}
	n.Ready, n.State = ConditionState(c.Generation, c.Status.CommonStatus)
	ranges, err := c.RemoteRanges()
	if err != nil {
		n.State = err.Error()
	}
	for _, r := range ranges {
		m := Remap{CIDR: r.Real.String()}
		if r.Remapped.IsValid() {
			m.Remapped = r.Remapped.String()
		}
		if r.Field == "pod" {
			n.PodCIDRs = append(n.PodCIDRs, m)
		} else {
			n.ExternalCIDRs = append(n.ExternalCIDRs, m)
		}
	}
	return n
}

// WriteSummary writes the description for a human: the cluster, then a
// line per peer.
func (doc *Description) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Cluster ID:\t%s\n", doc.ClusterID)
	fmt.Fprintf(tw, "Pod CIDRs:\t%s\n", strings.Join(doc.Network.PodCIDRs, ", "))
	fmt.Fprintf(tw, "Service CIDR:\t%s\n", orNone(doc.Network.ServiceCIDR))
	fmt.Fprintf(tw, "External CIDR:\t%s\n", orNone(doc.Network.ExternalCIDR))
	fmt.Fprintf(tw, "Internal CIDR:\t%s\n", orNone(doc.Network.InternalCIDR))
	_ = tw.Flush()
	fmt.Fprintln(w)
	if len(doc.Peers) == 0 {
		fmt.Fprintln(w, "No peers.")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tROLE\tENDPOINT\tCONNECTION\tLATENCY\tPOD CIDRS")
	for _, p := range doc.Peers {
		role, endpoint, status, latency := "-", "-", "-", "-"
		if gw := p.Network.Gateway; gw != nil {
			role, endpoint = gw.Role, endpointString(gw)
		}
		if p.Connection != nil {
			status, latency = orNone(p.Connection.Status), orNone(p.Connection.Latency)
		}
		pods := "-"
		if c := p.Network.Configuration; c != nil {
			pods = remapString(c.PodCIDRs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ClusterID, role, endpoint, status, latency, pods)
	}
	_ = tw.Flush()
}

// WriteSummary writes what the cluster holds for one peer, for a human.
func (p PeerInfo) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Peer:\t%s\n", p.ClusterID)
	if n := p.Network.Configuration; n != nil {
		fmt.Fprintf(tw, "Configuration:\t%s (%s)\n", n.Name, readyWord(n.Ready, n.State))
		fmt.Fprintf(tw, "Pod CIDRs:\t%s\n", remapString(n.PodCIDRs))
		fmt.Fprintf(tw, "External CIDRs:\t%s\n", remapString(n.ExternalCIDRs))
	} else {
		fmt.Fprintf(tw, "Configuration:\tnone\n")
	}
	// Beside how this cluster reaches the peer, how the peer reaches it.
	switch c := p.Connection; {
	case c == nil:
	case len(c.PeerView) > 0:
		fmt.Fprintf(tw, "Seen by the peer:\t%s\n", remapString(c.PeerView))
	default:
		fmt.Fprintf(tw, "Seen by the peer:\tunknown (not announced yet, or the peer's gateway is of a release that does not announce it)\n")
	}
	if gw := p.Network.Gateway; gw != nil {
		fmt.Fprintf(tw, "Gateway:\t%s %s (%s)\n", gw.Role, manifests.ObjectRef(gw.Namespace, gw.Name), readyWord(gw.Ready, gw.State))
		fmt.Fprintf(tw, "Endpoint:\t%s\n", endpointString(gw))
		fmt.Fprintf(tw, "MTU:\t%d\n", gw.MTU)
	} else {
		fmt.Fprintf(tw, "Gateway:\tnone\n")
	}
	fmt.Fprintf(tw, "Peer public key:\t%s\n", orNone(p.PublicKey))
	if c := p.Connection; c != nil {
		fmt.Fprintf(tw, "Connection:\t%s %s\n", c.Name, orNone(c.Status))
		if c.Message != "" {
			fmt.Fprintf(tw, "Why:\t%s\n", c.Message)
		}
		fmt.Fprintf(tw, "Latency:\t%s\n", orNone(c.Latency))
		fmt.Fprintf(tw, "Path MTU:\t%s\n", pathMTUString(c.PathMTU, p.Network.Gateway))
		fmt.Fprintf(tw, "Peer MTU:\t%s\n", peerMTUString(c))
		if f := c.FollowedEndpoint; f != nil {
			fmt.Fprintf(tw, "Server moved to:\t%s (announced through the tunnel; the GatewayClient names %s, and wins once it names another)\n",
				netv1beta1.AnnouncedEndpoint{Addresses: f.Addresses, Port: f.Port}, f.Over)
		}
	} else {
		fmt.Fprintf(tw, "Connection:\tnone\n")
	}
	if sv := p.Services; sv != nil {
		fmt.Fprintf(tw, "Exported to it:\t%s\n", orNone(strings.Join(sv.Exported, ", ")))
		fmt.Fprintf(tw, "It exports:\t%s\n", orNone(strings.Join(sv.Imported, ", ")))
	}
	_ = tw.Flush()
}

// connectionInfo is what a Connection says of the tunnel.
func connectionInfo(c *netv1beta1.Connection) *ConnectionInfo {
	info := &ConnectionInfo{Name: c.Name, Status: string(c.Status.Value), Latency: c.Status.Latency.Value,
		PathMTU: c.Status.PathMTU, PeerMTU: c.Status.PeerMTU}
	for _, v := range c.Status.PeerView {
		info.PeerView = append(info.PeerView, Remap{CIDR: string(v.CIDR), Remapped: string(v.SeenAs)})
	}
	if m := apimeta.FindStatusCondition(c.Status.Conditions, netv1beta1.ConditionMTUMismatch); m != nil && m.Status == metav1.ConditionTrue {
		info.MTUMismatch = m.Message
	}
	if r := apimeta.FindStatusCondition(c.Status.Conditions, netv1beta1.ConditionReady); r != nil && c.Status.Value != netv1beta1.Connected {
		info.Message = r.Message
	}
	if v, ok := c.Annotations[netv1beta1.FollowedEndpointAnnotation]; ok {
		if f, err := netv1beta1.ParseFollowedEndpoint(v); err == nil {
			info.FollowedEndpoint = &f
		}
	}
	return info
}

// peerMTUString says which MTU the peer's gateway announces, and whether
// it differs from this side's.
func peerMTUString(c *ConnectionInfo) string {
	switch {
	case c.PeerMTU == 0:
		return "unknown (not announced yet, or the peer's gateway is of a release that does not announce it)"
	case c.MTUMismatch != "":
		return fmt.Sprintf("%d (mismatch: %s)", c.PeerMTU, c.MTUMismatch)
	default:
		return strconv.Itoa(int(c.PeerMTU))
	}
}

// pathMTUString says what the gateway measured of the path, against the
// gateway's configured MTU when it is known.
func pathMTUString(pathMTU int32, gw *GatewayInfo) string {
	switch {
	case pathMTU == 0:
		return "not measured yet"
	case gw != nil && int(pathMTU) < gw.MTU:
		return fmt.Sprintf("%d (below the configured MTU %d: TCP is clamped to it, larger packets of other protocols are lost)", pathMTU, gw.MTU)
	default:
		return strconv.Itoa(int(pathMTU))
	}
}

func readyWord(ready bool, state string) string {
	if ready {
		return "Ready"
	}
	return "not ready: " + state
}

func endpointString(gw *GatewayInfo) string {
	if len(gw.Addresses) == 0 {
		return "pending"
	}
	return fmt.Sprintf("%s:%d", strings.Join(gw.Addresses, ","), gw.Port)
}

func remapString(rs []Remap) string {
	if len(rs) == 0 {
		return "none"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		switch r.Remapped {
		case "":
			parts[i] = r.CIDR + " -> (pending)"
		case r.CIDR:
			parts[i] = r.CIDR
		default:
			parts[i] = r.CIDR + " -> " + r.Remapped
		}
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// Peer returns the peer of cluster ID id.
func (doc *Description) Peer(id string) (PeerInfo, error) {
	i := slices.IndexFunc(doc.Peers, func(p PeerInfo) bool { return p.ClusterID == id })
	if i < 0 {
		return PeerInfo{}, fmt.Errorf("peer %q: no Configuration, gateway or PublicKey labelled %s=%s", id, netv1beta1.RemoteClusterIDLabel, id)
	}
	return doc.Peers[i], nil
}

// Encode writes doc, a Description or a PeerInfo, in format; with a dot path
// (keys matched case-insensitively, list items by index), only the value
// there: a string, number or boolean alone on its line, else the part of
// the document under it.
func Encode(doc any, format manifests.Format, path string) ([]byte, error) {
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if path != "" {
		if v, err = lookupPath(v, path); err != nil {
			return nil, err
		}
		switch v.(type) {
		case string, float64, bool:
			return fmt.Appendln(nil, v), nil
		}
	}
	if format == manifests.FormatJSON {
		out, err := json.MarshalIndent(v, "", "  ")
		return append(out, '\n'), err
	}
	return yaml.Marshal(v)
}

// lookupPath walks a decoded JSON value along a dot path; map keys match
// case-insensitively and list items are picked by index.
func lookupPath(v any, path string) (any, error) {
	walked := ""
	for seg := range strings.SplitSeq(path, ".") {
		switch node := v.(type) {
		case map[string]any:
			found := false
			for _, k := range slices.Sorted(maps.Keys(node)) {
				if strings.EqualFold(k, seg) {
					v, found = node[k], true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("%q: no key %q under %q (keys: %s)", path, seg, walked, strings.Join(slices.Sorted(maps.Keys(node)), ", "))
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(node) {
				return nil, fmt.Errorf("%q: %q under %q is not an index of a list of %d", path, seg, walked, len(node))
			}
			v = node[i]
		default:
			return nil, fmt.Errorf("%q: %q is a value, it has no %q", path, walked, seg)
		}
		walked = strings.TrimPrefix(walked+"."+seg, ".")
	}
	return v, nil
}

// ReadInfoFile reads a cluster's facts from a file: a saved cluster-info
// ConfigMap, or a Description as `peerlink info -o yaml` prints it. Both
// forms carry the allowlist of peer ranges (allowedPeerCIDRs) and the
// address plan for peers (routedPeerCIDRs).
func ReadInfoFile(path string) (clusterinfo.Info, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return clusterinfo.Info{}, err
	}
	var doc struct {
		Kind      string            `json:"kind"`
		Data      map[string]string `json:"data"`
		ClusterID string            `json:"clusterID"`
		Network   NetworkInfo       `json:"network"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return clusterinfo.Info{}, fmt.Errorf("%s: %w", path, err)
	}
	fields := doc.Data
	if doc.Kind != "ConfigMap" {
		fields = map[string]string{
			clusterinfo.KeyClusterID:    doc.ClusterID,
			clusterinfo.KeyPodCIDRs:     strings.Join(doc.Network.PodCIDRs, ","),
			clusterinfo.KeyServiceCIDR:  doc.Network.ServiceCIDR,
			clusterinfo.KeyExternalCIDR: doc.Network.ExternalCIDR,
			clusterinfo.KeyInternalCIDR: doc.Network.InternalCIDR,
			// Without it, render would hold the peer's ranges to the
			// default allowlist, not this cluster's.
			clusterinfo.KeyAllowedPeerCIDRs: strings.Join(doc.Network.AllowedPeerCIDRs, ","),
			// Without it, render would remap every range the controller
			// keeps as it is.
			clusterinfo.KeyRoutedPeerCIDRs: strings.Join(doc.Network.RoutedPeerCIDRs, ","),
		}
	}
	info, err := clusterinfo.Decode(fields)
	if err != nil {
		return clusterinfo.Info{}, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}
