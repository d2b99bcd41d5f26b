package peering

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/kube"
	"github.com/peerlink/peerlink/templates"
)

// Finding is the outcome of one check: of the cluster (Peer empty) or of
// its peering with Peer.
type Finding struct {
	Peer  string `json:"peer,omitempty"`
	Check string `json:"check"`
	OK    bool   `json:"ok"`
	// Message says what the check found and, when it failed, what to do.
	Message string `json:"message"`
}

// Diagnosis is what `peerlink diagnose` prints: every check of a cluster
// and of each of its peerings, failed or not.
type Diagnosis struct {
	ClusterID string    `json:"clusterID"`
	Findings  []Finding `json:"findings"`
}

// Failed counts the findings that failed.
func (d *Diagnosis) Failed() int {
	return countFailed(d.Findings, func(f Finding) bool { return f.OK })
}

// countFailed counts the results of a report that are not ok.
func countFailed[T any](results []T, ok func(T) bool) int {
	n := 0
	for _, r := range results {
		if !ok(r) {
			n++
		}
	}
	return n
}

func (d *Diagnosis) add(peer, check string, ok bool, format string, args ...any) {
	d.Findings = append(d.Findings, Finding{Peer: peer, Check: check, OK: ok, Message: fmt.Sprintf(format, args...)})
}

// maxClockSkew is how far apart two API servers' clocks may be before
// diagnose reports it: tokens, certificates and the gateways' Leases all
// assume clocks agree to within a few seconds.
const maxClockSkew = 2 * time.Second

// Diagnose checks a cluster and each of its peerings from what its API
// server holds: peerlink's controller and fabric agents running (one agent
// on every node), and for each peer its Configuration, its gateway and
// endpoint, its public key, the tunnel and its MTU. With remote, a
// cluster holding the other side of some of the peerings, it also checks
// across both: that each side holds the key the other's tunnel runs on and
// that the two API servers' clocks agree.
func Diagnose(ctx context.Context, local, remote *Cluster, peerlinkNamespace string) (*Diagnosis, error) {
	doc, err := Describe(ctx, local.Client, peerlinkNamespace)
	if err != nil {
		return nil, err
	}
	d := &Diagnosis{ClusterID: doc.ClusterID}
	if err := checkWorkloads(ctx, local.Client, peerlinkNamespace, d); err != nil {
		return nil, err
	}
	for _, p := range doc.Peers {
		checkPeer(p, d)
	}
	if remote == nil {
		return d, nil
	}
	rdoc, err := Describe(ctx, remote.Client, peerlinkNamespace)
	if err != nil {
		return nil, fmt.Errorf("remote cluster: %w", err)
	}
	for _, s := range []struct {
		of, holder     *Cluster
		ofID, holderID string
	}{{local, remote, doc.ClusterID, rdoc.ClusterID}, {remote, local, rdoc.ClusterID, doc.ClusterID}} {
		if err := checkKeyHeld(ctx, s.of.Client, s.holder.Client, s.ofID, s.holderID, rdoc.ClusterID, d); err != nil {
			return nil, err
		}
	}
	if err := nameTunnelCause(ctx, remote.Client, doc, rdoc.ClusterID, d); err != nil {
		return nil, err
	}
	checkClocks(ctx, local, remote, rdoc.ClusterID, d)
	return d, nil
}

// nameTunnelCause tells, in the failed tunnel finding of the peering with
// the remote cluster (remoteID), which of the two usual causes holds, from
// the remote cluster's gateway pods for this one (doc's): none ready, the
// peer's gateway is stopped; one ready, the UDP path between the two
// clusters is blocked.
func nameTunnelCause(ctx context.Context, remote client.Reader, doc *Description, remoteID string, d *Diagnosis) error {
	i := slices.IndexFunc(d.Findings, func(f Finding) bool { return f.Peer == remoteID && f.Check == "tunnel" && !f.OK })
	j := slices.IndexFunc(doc.Peers, func(p PeerInfo) bool { return p.ClusterID == remoteID })
	if i < 0 || j < 0 || doc.Peers[j].Network.Gateway == nil {
		return nil
	}
	localID, gw := doc.ClusterID, doc.Peers[j].Network.Gateway
	var pods corev1.PodList
	if err := remote.List(ctx, &pods, client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: localID}, client.HasLabels{netv1beta1.GatewayNameLabel}); err != nil {
		return fmt.Errorf("remote cluster: list the gateway pods for %s: %w", localID, err)
	}
	ready := 0
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && kube.PodReady(p) {
			ready++
		}
	}
	f := &d.Findings[i]
	state, _, _ := strings.Cut(f.Message, ":")
	if ready == 0 {
		f.Message = fmt.Sprintf("%s: the peer's gateway is stopped: %s has %d gateway pods for this cluster, none ready; start it there "+
			"(kubectl get deployments,pods -A -l %s=%s on %s; is its controller running?)",
			state, remoteID, len(pods.Items), netv1beta1.RemoteClusterIDLabel, localID, remoteID)
		return nil
	}
	server := "this cluster's server at UDP " + endpointString(gw)
	if gw.Role == string(gatewayrole.Client) {
		server = "the server at UDP " + endpointString(gw)
	}
	f.Message = fmt.Sprintf("%s: the peer's gateway runs (%d ready pods on %s), so the UDP path between the two clusters is blocked: "+
		"open %s to the client's nodes in every firewall or security group on the way", state, ready, remoteID, server)
	return nil
}

// checkWorkloads checks that the controller is available and that a ready
// fabric agent runs on every node.
func checkWorkloads(ctx context.Context, c client.Reader, ns string, d *Diagnosis) error {
	var dep appsv1.Deployment
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: templates.ControllerDeployment}, &dep); err != nil {
		d.add("", "controller", false, "deployment %s/%s: %v: install peerlink (peerlink install)", ns, templates.ControllerDeployment, err)
	} else if dep.Status.AvailableReplicas < 1 {
		d.add("", "controller", false, "deployment %s/%s has no available replica: nothing acts on peering objects; see kubectl -n %s describe pods -l app.kubernetes.io/name=%s",
			ns, templates.ControllerDeployment, ns, templates.ControllerDeployment)
	} else {
		d.add("", "controller", true, "%d of %d replicas available", dep.Status.AvailableReplicas, dep.Status.Replicas)
	}

	var nodes corev1.NodeList
	var pods corev1.PodList
	if err := c.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": templates.FabricDaemonSet}); err != nil {
		return fmt.Errorf("list the fabric agents: %w", err)
	}
	var missing []string
	for _, n := range nodes.Items {
		if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName == n.Name && kube.PodReady(&p) }) {
			missing = append(missing, n.Name)
		}
	}
	if len(missing) > 0 {
		d.add("", "fabric", false, "no ready fabric agent on node %s: traffic between that node's pods and every peer is lost; see kubectl -n %s get pods -l app.kubernetes.io/name=%s -o wide",
			strings.Join(missing, ", "), ns, templates.FabricDaemonSet)
	} else {
		d.add("", "fabric", true, "a ready fabric agent on each of the %d nodes", len(nodes.Items))
	}
	return nil
}

// checkPeer checks one peering as this cluster holds it.
func checkPeer(p PeerInfo, d *Diagnosis) {
	id := p.ClusterID
	switch c := p.Network.Configuration; {
	case c == nil:
		d.add(id, "configuration", false, "no Configuration of %s: apply the one its admin sent (peerlink bundle add, or create configuration)", id)
	case !c.Ready:
		d.add(id, "configuration", false, "Configuration %s not ready: %s", c.Name, c.State)
	default:
		d.add(id, "configuration", true, "pods of %s reached at %s", id, remapString(c.PodCIDRs))
	}
	gw := p.Network.Gateway
	switch {
	case gw == nil:
		d.add(id, "gateway", false, "no GatewayServer or GatewayClient for %s: one side applies a server, the other a client (peerlink network connect, or bundle init)", id)
		return
	case gw.Role == string(gatewayrole.Client) && len(gw.Addresses) == 0:
		d.add(id, "gateway", false, "GatewayClient %s/%s has no endpoint: fill in the server's (its status.endpoint; peerlink bundle add does)", gw.Namespace, gw.Name)
	case !gw.Ready:
		d.add(id, "gateway", false, "%s %s/%s not ready: %s", gatewayKind(gw.Role), gw.Namespace, gw.Name, gw.State)
	default:
		d.add(id, "gateway", true, "%s at %s", gw.Role, endpointString(gw))
	}
	if p.PublicKey == "" {
		d.add(id, "public key", false, "no PublicKey of %s's gateway: ask its admin for it (peerlink bundle export), or run peerlink network connect", id)
	} else {
		d.add(id, "public key", true, "%s", p.PublicKey)
	}
	conn := p.Connection
	switch {
	case conn == nil:
		d.add(id, "tunnel", false, "no Connection yet: the gateway pod has not reported; see kubectl -n %s get pods", gw.Namespace)
	case conn.Status != string(netv1beta1.Connected):
		d.add(id, "tunnel", false, "%s, not Connected: %s", orNone(conn.Status), tunnelHint(gw))
	default:
		d.add(id, "tunnel", true, "Connected, latency %s", orNone(conn.Latency))
	}
	switch {
	case conn == nil || conn.Status != string(netv1beta1.Connected):
	case conn.MTUMismatch != "":
		d.add(id, "mtu", false, "%s: give both gateways the same MTU (spec.mtu, --mtu)", conn.MTUMismatch)
	case conn.PathMTU > 0 && gw.MTU > 0 && int(conn.PathMTU) < gw.MTU:
		d.add(id, "mtu", false, "packets of %d bytes cross the tunnel, not %d: something on the path between the gateways carries less; lower the MTU of both gateways to %d", conn.PathMTU, gw.MTU, conn.PathMTU)
	default:
		d.add(id, "mtu", true, "%s", pathMTUString(conn.PathMTU, gw))
	}
}

// tunnelHint says where a tunnel that does not come up usually fails, as
// seen from this side's role.
func tunnelHint(gw *GatewayInfo) string {
	if gw.Role == string(gatewayrole.Server) {
		return fmt.Sprintf("no handshake from the peer's client: check that UDP %s reaches this server from the peer's nodes (a firewall, a security group, the Service's exposure), that the peer's gateway runs, and the peer's own peerlink diagnose", endpointString(gw))
	}
	return fmt.Sprintf("no handshake with the server at %s: check that this cluster's nodes reach that UDP port (a firewall, a security group), that the server still publishes that endpoint, that the peer's gateway runs, and the peer's own peerlink diagnose", endpointString(gw))
}

func gatewayKind(role string) string {
	if role == string(gatewayrole.Server) {
		return "GatewayServer"
	}
	return "GatewayClient"
}

// checkKeyHeld checks that holder holds, as the PublicKey of cluster of
// (ofID), the key of's tunnel runs on, for every Connection of of with
// holder; its findings are about the peering with peer.
func checkKeyHeld(ctx context.Context, of, holder client.Reader, ofID, holderID, peer string, d *Diagnosis) error {
	var conns netv1beta1.ConnectionList
	if err := of.List(ctx, &conns, client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: holderID}); err != nil {
		return fmt.Errorf("list the Connections of %s: %w", ofID, err)
	}
	var keys netv1beta1.PublicKeyList
	if err := holder.List(ctx, &keys, client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: ofID}); err != nil {
		return fmt.Errorf("list the PublicKeys %s holds: %w", holderID, err)
	}
	for _, c := range conns.Items {
		if len(c.Status.PublicKey) == 0 {
			continue
		}
		held := slices.ContainsFunc(keys.Items, func(k netv1beta1.PublicKey) bool { return bytes.Equal(k.Spec.PublicKey, c.Status.PublicKey) })
		if held {
			d.add(peer, "key agreement", true, "%s holds the key %s's gateway runs on", holderID, ofID)
			continue
		}
		d.add(peer, "key agreement", false, "%s does not hold the key %s's gateway runs on (Connection %s/%s): hand it over (peerlink network connect, or bundle export and add)",
			holderID, ofID, c.Namespace, c.Name)
	}
	return nil
}

// checkClocks compares the clocks of the two API servers, as the Date
// header of their answers gives them (to the second).
func checkClocks(ctx context.Context, local, remote *Cluster, remoteID string, d *Diagnosis) {
	lo, lerr := clockOffset(ctx, local.Config)
	ro, rerr := clockOffset(ctx, remote.Config)
	if err := errors.Join(lerr, rerr); err != nil {
		d.add(remoteID, "clocks", false, "could not read both API servers' clocks: %v", err)
		return
	}
	skew := (lo - ro).Abs()
	if skew > maxClockSkew {
		d.add(remoteID, "clocks", false, "the API servers' clocks are %s apart: synchronize both clusters' nodes with NTP", skew.Round(time.Second))
		return
	}
	d.add(remoteID, "clocks", true, "the API servers' clocks agree to %s", skew.Round(time.Second))
}

// clockOffset is how far the API server's clock is ahead of this
// machine's, from the Date header of its answer to GET /version: that
// header is whole seconds, so the offset is good to about half a second.
func clockOffset(ctx context.Context, cfg *rest.Config) (time.Duration, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/version", nil)
	if err != nil {
		return 0, err
	}
	sent := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// The server answered about half way through the round trip, some
	// time within the second its Date header names.
	answered := sent.Add(time.Since(sent) / 2)
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return 0, fmt.Errorf("%s: Date header %q: %w", cfg.Host, resp.Header.Get("Date"), err)
	}
	return date.Add(500 * time.Millisecond).Sub(answered), nil
}

// WriteSummary prints the findings as a table, failed ones first.
func (d *Diagnosis) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Cluster %s\n", d.ClusterID)
	fmt.Fprintln(tw, "PEER\tCHECK\tRESULT\tDETAILS")
	for _, failed := range []bool{true, false} {
		for _, f := range d.Findings {
			if f.OK == failed {
				continue
			}
			result := "ok"
			if failed {
				result = "FAILED"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cmp.Or(f.Peer, "-"), f.Check, result, f.Message)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "%d checks, %d failed\n", len(d.Findings), d.Failed())
}
