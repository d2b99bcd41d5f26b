package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/generators"
)

// infoDocument is what `peerlink info -o yaml` prints and --get reads. Its
// clusterID and network parts are also accepted by `render --cluster-info`.
type infoDocument struct {
	ClusterID string      `json:"clusterID"`
	Network   networkInfo `json:"network"`
	Peers     []peerInfo  `json:"peers"`
}

type networkInfo struct {
	PodCIDRs     []string `json:"podCIDRs"`
	ServiceCIDR  string   `json:"serviceCIDR,omitempty"`
	ExternalCIDR string   `json:"externalCIDR,omitempty"`
	InternalCIDR string   `json:"internalCIDR,omitempty"`
}

type peerInfo struct {
	ClusterID  string          `json:"clusterID"`
	Network    *peerNetwork    `json:"network,omitempty"`
	Gateway    *gatewayInfo    `json:"gateway,omitempty"`
	PublicKey  string          `json:"publicKey,omitempty"`
	Connection *connectionInfo `json:"connection,omitempty"`
}

// peerNetwork is a peer's Configuration: its real ranges and how this
// cluster sees them.
type peerNetwork struct {
	Configuration string  `json:"configuration"`
	Ready         bool    `json:"ready"`
	State         string  `json:"state"`
	PodCIDRs      []remap `json:"podCIDRs"`
	ExternalCIDRs []remap `json:"externalCIDRs,omitempty"`
}

// remap is one range of a peer: as the peer has it and as it is reached
// from here (equal when it needed no remapping, empty while not allocated).
type remap struct {
	CIDR     string `json:"cidr"`
	Remapped string `json:"remapped,omitempty"`
}

type gatewayInfo struct {
	Role      string   `json:"role"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Addresses []string `json:"addresses,omitempty"`
	Port      int32    `json:"port,omitempty"`
	MTU       int      `json:"mtu,omitempty"`
	Ready     bool     `json:"ready"`
	State     string   `json:"state"`
}

type connectionInfo struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Latency string `json:"latency,omitempty"`
}

func newInfoCmd(g *globalOptions) *cobra.Command {
	var output, get string
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show this cluster's ID, network and peers",
		Long: `Show what this cluster publishes (cluster ID and CIDRs) and, for each peer,
its ranges and their remapping, the gateway and the tunnel status.

--get prints one value of the document -o yaml shows, by a dot path whose
keys match case-insensitively: clusterid, network.podCIDRs, peers.0.gateway.`,
		Example: `  peerlink info
  peerlink info --get clusterid
  peerlink info --get network.podCIDRs
  peerlink info -o yaml > cluster-a-info.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := collectInfo(cmd.Context(), g)
			if err != nil {
				return err
			}
			return printInfo(cmd.OutOrStdout(), doc, output, get, func(w io.Writer) { printClusterInfo(w, doc) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json instead of the summary")
	cmd.Flags().StringVar(&get, "get", "", "print only the value at this dot path")
	cmd.AddCommand(newInfoPeerCmd(g))
	return cmd
}

func newInfoPeerCmd(g *globalOptions) *cobra.Command {
	var output, get string
	cmd := &cobra.Command{
		Use:   "peer ID",
		Short: "Show one peer: remapped ranges, gateway role and endpoint, tunnel status and latency",
		Example: `  peerlink info peer cluster-b
  peerlink info peer cluster-b --get connection.status`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := collectInfo(cmd.Context(), g)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(doc.Peers, func(p peerInfo) bool { return p.ClusterID == args[0] })
			if i < 0 {
				return fmt.Errorf("peer %q: no Configuration, gateway or PublicKey labelled %s=%s", args[0], netv1beta1.RemoteClusterIDLabel, args[0])
			}
			peer := doc.Peers[i]
			return printInfo(cmd.OutOrStdout(), peer, output, get, func(w io.Writer) { printPeer(w, peer) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json instead of the summary")
	cmd.Flags().StringVar(&get, "get", "", "print only the value at this dot path")
	return cmd
}

// printInfo prints a document as YAML or JSON, one value of it with --get,
// or the human summary.
func printInfo(w io.Writer, doc any, output, get string, human func(io.Writer)) error {
	if output != "" {
		if _, err := generators.ParseFormat(output); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
	}
	if get == "" && output == "" {
		human(w)
		return nil
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode info: %w", err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("decode info: %w", err)
	}
	if get != "" {
		if v, err = lookupPath(v, get); err != nil {
			return fmt.Errorf("--get: %w", err)
		}
		switch s := v.(type) {
		case string:
			_, err := fmt.Fprintln(w, s)
			return err
		case float64, bool:
			_, err := fmt.Fprintln(w, s)
			return err
		}
	}
	var out []byte
	if output == string(generators.FormatJSON) {
		out, err = json.MarshalIndent(v, "", "  ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("encode info: %w", err)
	}
	_, err = w.Write(out)
	return err
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

// collectInfo reads the cluster facts and every peering object.
func collectInfo(ctx context.Context, g *globalOptions) (*infoDocument, error) {
	cl, err := g.local().client()
	if err != nil {
		return nil, err
	}
	info, err := readClusterInfo(ctx, cl, g.PeerlinkNamespace)
	if err != nil {
		return nil, err
	}
	doc := &infoDocument{ClusterID: info.ClusterID, Network: networkInfo{PodCIDRs: prefixStrings(info.PodCIDRs)}}
	if info.ServiceCIDR.IsValid() {
		doc.Network.ServiceCIDR = info.ServiceCIDR.String()
	}
	if info.ExternalCIDR.IsValid() {
		doc.Network.ExternalCIDR = info.ExternalCIDR.String()
	}
	if info.InternalCIDR.IsValid() {
		doc.Network.InternalCIDR = info.InternalCIDR.String()
	}

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
	peers := map[string]*peerInfo{}
	peer := func(labels map[string]string) *peerInfo {
		id := labels[netv1beta1.RemoteClusterIDLabel]
		if id == "" {
			return nil
		}
		if peers[id] == nil {
			peers[id] = &peerInfo{ClusterID: id}
		}
		return peers[id]
	}
	for i := range confs.Items {
		c := &confs.Items[i]
		if p := peer(c.Labels); p != nil {
			p.Network = configurationInfo(c)
		}
	}
	connection := func(ns, gateway string) *connectionInfo {
		for _, c := range conns.Items {
			if c.Namespace == ns && c.Name == generators.GatewayObjectName(gateway) {
				return &connectionInfo{Name: c.Name, Status: string(c.Status.Value), Latency: c.Status.Latency.Value}
			}
		}
		return nil
	}
	for i := range servers.Items {
		s := &servers.Items[i]
		if p := peer(s.Labels); p != nil {
			gw := &gatewayInfo{Role: string(generators.RoleServer), Name: s.Name, Namespace: s.Namespace, MTU: s.Spec.MTU}
			if ep := s.Status.Endpoint; ep != nil {
				gw.Addresses, gw.Port = ep.Addresses, ep.Port
			}
			gw.Ready, gw.State = conditionState(s.Generation, s.Status.CommonStatus)
			p.Gateway, p.Connection = gw, connection(s.Namespace, s.Name)
		}
	}
	for i := range clients.Items {
		c := &clients.Items[i]
		if p := peer(c.Labels); p != nil {
			gw := &gatewayInfo{Role: string(generators.RoleClient), Name: c.Name, Namespace: c.Namespace, MTU: c.Spec.MTU,
				Addresses: c.Spec.Endpoint.Addresses, Port: c.Spec.Endpoint.Port}
			gw.Ready, gw.State = conditionState(c.Generation, c.Status.CommonStatus)
			p.Gateway, p.Connection = gw, connection(c.Namespace, c.Name)
		}
	}
	for i := range keys.Items {
		k := &keys.Items[i]
		if p := peer(k.Labels); p != nil {
			p.PublicKey = objectRef(k.Namespace, k.Name)
		}
	}
	doc.Peers = []peerInfo{}
	for _, id := range slices.Sorted(maps.Keys(peers)) {
		doc.Peers = append(doc.Peers, *peers[id])
	}
	return doc, nil
}

func configurationInfo(c *netv1beta1.Configuration) *peerNetwork {
	n := &peerNetwork{Configuration: objectRef(c.Namespace, c.Name)}
	n.Ready, n.State = conditionState(c.Generation, c.Status.CommonStatus)
	var status netv1beta1.ClusterConfigCIDR
	if c.Status.Remote != nil {
		status = c.Status.Remote.CIDR
	}
	n.PodCIDRs = remaps(c.Spec.Remote.CIDR.Pod, status.Pod)
	n.ExternalCIDRs = remaps(c.Spec.Remote.CIDR.External, status.External)
	return n
}

// remaps pairs the spec CIDRs with their index-aligned status entries.
func remaps(spec, status []netv1beta1.CIDR) []remap {
	var out []remap
	for i, c := range spec {
		r := remap{CIDR: string(c)}
		if i < len(status) {
			r.Remapped = string(status[i])
		}
		out = append(out, r)
	}
	return out
}

// conditionState summarises the Ready condition for the current generation.
func conditionState(generation int64, s netv1beta1.CommonStatus) (bool, string) {
	if s.ObservedGeneration < generation {
		return false, "not reconciled yet"
	}
	c := meta.FindStatusCondition(s.Conditions, netv1beta1.ConditionReady)
	if c == nil {
		return false, "no Ready condition yet"
	}
	state := c.Reason
	if c.Message != "" {
		state += ": " + c.Message
	}
	return c.Status == "True", state
}

func printClusterInfo(w io.Writer, doc *infoDocument) {
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
		if p.Gateway != nil {
			role, endpoint = p.Gateway.Role, endpointString(p.Gateway)
		}
		if p.Connection != nil {
			status, latency = orNone(p.Connection.Status), orNone(p.Connection.Latency)
		}
		pods := "-"
		if p.Network != nil {
			pods = remapString(p.Network.PodCIDRs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ClusterID, role, endpoint, status, latency, pods)
	}
	_ = tw.Flush()
}

func printPeer(w io.Writer, p peerInfo) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Peer:\t%s\n", p.ClusterID)
	if n := p.Network; n != nil {
		fmt.Fprintf(tw, "Configuration:\t%s (%s)\n", n.Configuration, readyWord(n.Ready, n.State))
		fmt.Fprintf(tw, "Pod CIDRs:\t%s\n", remapString(n.PodCIDRs))
		fmt.Fprintf(tw, "External CIDRs:\t%s\n", remapString(n.ExternalCIDRs))
	} else {
		fmt.Fprintf(tw, "Configuration:\tnone\n")
	}
	if gw := p.Gateway; gw != nil {
		fmt.Fprintf(tw, "Gateway:\t%s %s (%s)\n", gw.Role, objectRef(gw.Namespace, gw.Name), readyWord(gw.Ready, gw.State))
		fmt.Fprintf(tw, "Endpoint:\t%s\n", endpointString(gw))
		fmt.Fprintf(tw, "MTU:\t%d\n", gw.MTU)
	} else {
		fmt.Fprintf(tw, "Gateway:\tnone\n")
	}
	fmt.Fprintf(tw, "Peer public key:\t%s\n", orNone(p.PublicKey))
	if c := p.Connection; c != nil {
		fmt.Fprintf(tw, "Connection:\t%s %s\n", c.Name, orNone(c.Status))
		fmt.Fprintf(tw, "Latency:\t%s\n", orNone(c.Latency))
	} else {
		fmt.Fprintf(tw, "Connection:\tnone\n")
	}
	_ = tw.Flush()
}

func readyWord(ready bool, state string) string {
	if ready {
		return "Ready"
	}
	return "not ready: " + state
}

func endpointString(gw *gatewayInfo) string {
	if len(gw.Addresses) == 0 {
		return "pending"
	}
	return fmt.Sprintf("%s:%d", strings.Join(gw.Addresses, ","), gw.Port)
}

func remapString(rs []remap) string {
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
