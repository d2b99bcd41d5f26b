package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/generators"
)

// networkOptions are the flags of network connect, disconnect and reset.
type networkOptions struct {
	g                               *globalOptions
	remoteKubeconfig, remoteContext string
	timeout                         time.Duration
	wait                            bool
	mtu                             int
	serverServiceType, serverLBIP   string
	serverPort, serverNodePort      int32
	clientAddresses                 []string
	clientPort                      int32
	disableSharingKeys, skipConfirm bool
}

func newNetworkCmd(g *globalOptions) *cobra.Command {
	o := &networkOptions{g: g}
	cmd := &cobra.Command{
		Use:   "network",
		Short: "Connect, disconnect or reset the network peering of two clusters, with both kubeconfigs",
		Long: `Peer two clusters in one command when you hold both kubeconfigs. The local
cluster (--kubeconfig/--context) becomes the gateway client, the remote one
(--remote-kubeconfig/--remote-context) the gateway server.

The objects go to the tenant namespaces: on each cluster liqo-tenant-<peer id>,
named after the peer. Every command is idempotent: an interrupted run can be
run again.`,
		Example: `  peerlink network connect --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig --wait
  peerlink network disconnect --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig
  peerlink network reset --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig --skip-confirm`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.remoteKubeconfig, "remote-kubeconfig", "", "kubeconfig of the remote cluster (the gateway server side)")
	pf.StringVar(&o.remoteContext, "remote-context", "", "kubeconfig context of the remote cluster")
	pf.DurationVar(&o.timeout, "timeout", defaultTimeout, "how long each wait lasts before giving up")
	cmd.AddCommand(newConnectCmd(o), newDisconnectCmd(o), newResetCmd(o))
	return cmd
}

func (o *networkOptions) remote() clusterFlags {
	return clusterFlags{kubeconfig: o.remoteKubeconfig, context: o.remoteContext, kubeconfigFlag: "--remote-kubeconfig"}
}

// side is one cluster of a peering, as the network commands see it.
type side struct {
	name string // "local" or "remote", for progress lines
	cfg  *rest.Config
	c    client.Client
	info clusterinfo.Info
	p    progress
}

// sides connects to both clusters and reads what they publish.
func (o *networkOptions) sides(ctx context.Context, out io.Writer) (*side, *side, error) {
	if o.g.Namespace != "" {
		return nil, nil, errors.New("--namespace: the network commands use the tenant namespaces, liqo-tenant-<peer id> on each cluster")
	}
	if o.remoteKubeconfig == "" && o.remoteContext == "" {
		return nil, nil, errors.New("--remote-kubeconfig or --remote-context is required: the remote cluster is the gateway server side")
	}
	p := progress{out: out, timeout: o.timeout}
	var sides [2]*side
	for i, f := range []clusterFlags{o.g.local(), o.remote()} {
		name := [2]string{"local", "remote"}[i]
		cfg, err := f.restConfig()
		if err != nil {
			return nil, nil, err
		}
		c, err := newClient(cfg)
		if err != nil {
			return nil, nil, err
		}
		info, err := readClusterInfo(ctx, c, o.g.PeerlinkNamespace)
		if err != nil {
			return nil, nil, fmt.Errorf("%s cluster: %w", name, err)
		}
		sides[i] = &side{name: name, cfg: cfg, c: c, info: info, p: p.with(name)}
	}
	if sides[0].info.ClusterID == sides[1].info.ClusterID {
		return nil, nil, fmt.Errorf("both kubeconfigs reach cluster %q: the remote one must be another cluster", sides[0].info.ClusterID)
	}
	return sides[0], sides[1], nil
}

func newConnectCmd(o *networkOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "connect",
		Short: "Peer the networks of the local (client) and remote (server) clusters",
		Long: `Peer the networks of two clusters, in this order:
  1. read both clusters' facts (their cluster-info ConfigMaps);
  2. apply each cluster's Configuration on the other and wait until both are Ready;
  3. apply the GatewayServer on the remote cluster, wait for its endpoint and key;
  4. apply the GatewayClient on the local cluster, pointing at that endpoint
     (or at --gw-client-address/--gw-client-port), and wait for its key;
  5. hand each gateway's public key to the other cluster (unless --disable-sharing-keys);
  6. with --wait, wait until both Connections report Connected.`,
		Example: `  peerlink network connect --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig \
    --gw-server-service-type NodePort --wait`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.connect(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.wait, "wait", false, "wait until the tunnel is Connected on both sides")
	f.IntVar(&o.mtu, "mtu", netv1beta1.DefaultMTU, "MTU of the tunnel")
	f.StringVar(&o.serverServiceType, "gw-server-service-type", string(corev1.ServiceTypeLoadBalancer), "type of the gateway server Service: LoadBalancer, NodePort or ClusterIP")
	f.Int32Var(&o.serverPort, "gw-server-service-port", netv1beta1.DefaultGatewayPort, "port of the gateway server Service")
	f.Int32Var(&o.serverNodePort, "gw-server-service-nodeport", 0, "pin the node port of the gateway server Service")
	f.StringVar(&o.serverLBIP, "gw-server-service-loadbalancerip", "", "address to request from the load balancer")
	f.StringArrayVar(&o.clientAddresses, "gw-client-address", nil, "address the client connects to, instead of the server's published endpoint")
	f.Int32Var(&o.clientPort, "gw-client-port", 0, "port the client connects to, instead of the server's published endpoint")
	f.BoolVar(&o.disableSharingKeys, "disable-sharing-keys", false, "do not hand the public keys over (they are exchanged another way)")
	_ = cmd.RegisterFlagCompletionFunc("gw-server-service-type", cobra.FixedCompletions(
		[]string{"LoadBalancer", "NodePort", "ClusterIP"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// connectPlan are the checked flags of connect.
type connectPlan struct {
	server     generators.GatewayServerOptions
	addresses  []string
	clientPort int32
}

func (o *networkOptions) plan() (connectPlan, error) {
	typ, err := generators.ParseServiceType(o.serverServiceType)
	if err != nil {
		return connectPlan{}, fmt.Errorf("--gw-server-service-type: %w", err)
	}
	if err := generators.ValidatePort(o.serverPort); err != nil {
		return connectPlan{}, fmt.Errorf("--gw-server-service-port: %w", err)
	}
	if o.serverNodePort != 0 {
		if err := generators.ValidatePort(o.serverNodePort); err != nil {
			return connectPlan{}, fmt.Errorf("--gw-server-service-nodeport: %w", err)
		}
		if typ == corev1.ServiceTypeClusterIP {
			return connectPlan{}, errors.New("--gw-server-service-nodeport: only allowed with --gw-server-service-type NodePort or LoadBalancer")
		}
	}
	if err := generators.ValidateMTU(o.mtu); err != nil {
		return connectPlan{}, fmt.Errorf("--mtu: %w", err)
	}
	plan := connectPlan{
		server: generators.GatewayServerOptions{ServiceType: typ, Port: o.serverPort, NodePort: o.serverNodePort, MTU: o.mtu},
	}
	if o.serverLBIP != "" {
		addr, err := netip.ParseAddr(o.serverLBIP)
		if err != nil || !addr.Is4() {
			return connectPlan{}, fmt.Errorf("--gw-server-service-loadbalancerip: %q is not an IPv4 address", o.serverLBIP)
		}
		if typ != corev1.ServiceTypeLoadBalancer {
			return connectPlan{}, errors.New("--gw-server-service-loadbalancerip: only allowed with --gw-server-service-type LoadBalancer")
		}
		plan.server.LoadBalancerIP = addr
	}
	plan.addresses = splitList(o.clientAddresses)
	for _, a := range plan.addresses {
		if err := generators.ValidateAddress(a); err != nil {
			return connectPlan{}, fmt.Errorf("--gw-client-address: %w", err)
		}
	}
	if o.clientPort != 0 {
		if err := generators.ValidatePort(o.clientPort); err != nil {
			return connectPlan{}, fmt.Errorf("--gw-client-port: %w", err)
		}
	}
	plan.clientPort = o.clientPort
	return plan, nil
}

func (o *networkOptions) connect(ctx context.Context, out io.Writer) error {
	plan, err := o.plan()
	if err != nil {
		return err
	}
	local, remote, err := o.sides(ctx, out)
	if err != nil {
		return err
	}
	localID, remoteID := local.info.ClusterID, remote.info.ClusterID

	// Each cluster's network, declared on the other.
	for _, s := range []struct{ on, of *side }{{remote, local}, {local, remote}} {
		conf, err := generators.ConfigurationForPeer(s.of.info, "")
		if err != nil {
			return err
		}
		if err := applyInTenant(ctx, s.on, conf); err != nil {
			return err
		}
		s.on.p.infof("Configuration of %s applied (pod CIDRs %s)", s.of.info.ClusterID, strings.Join(prefixStrings(s.of.info.PodCIDRs), ", "))
	}
	for _, s := range []struct{ on, of *side }{{local, remote}, {remote, local}} {
		conf := &netv1beta1.Configuration{}
		key := client.ObjectKey{Namespace: generators.TenantNamespace(s.of.info.ClusterID), Name: s.of.info.ClusterID}
		_, err := s.on.p.wait(ctx, "the Configuration of "+s.of.info.ClusterID+" to be Ready", func(ctx context.Context) (bool, string, error) {
			if err := s.on.c.Get(ctx, key, conf); err != nil {
				return false, "", fmt.Errorf("get Configuration %s: %w", key, err)
			}
			ready, state := conditionState(conf.Generation, conf.Status.CommonStatus)
			return ready, state, nil
		})
		if err != nil {
			return err
		}
		s.on.p.infof("Network configuration correctly set up: pod CIDRs of %s %s", s.of.info.ClusterID, remapString(configurationInfo(conf).PodCIDRs))
	}

	// The server, on the remote cluster.
	serverOpts := plan.server
	serverOpts.Peer = generators.Peer{RemoteClusterID: localID}
	server, err := generators.GatewayServer(serverOpts)
	if err != nil {
		return err
	}
	if err := applyInTenant(ctx, remote, server); err != nil {
		return err
	}
	remote.p.infof("Gateway server %s applied", objectRef(server.Namespace, server.Name))
	serverKey := client.ObjectKeyFromObject(server)
	if err := waitServerEndpoint(ctx, remote.p, remote.c, serverKey, server); err != nil {
		return err
	}
	serverPub, err := waitPublicKey(ctx, remote, generators.RoleServer, serverKey)
	if err != nil {
		return err
	}
	remote.p.infof("Gateway server correctly set up: endpoint %s:%d", strings.Join(server.Status.Endpoint.Addresses, ","), server.Status.Endpoint.Port)

	// The client, on the local cluster.
	addresses, port := server.Status.Endpoint.Addresses, server.Status.Endpoint.Port
	if len(plan.addresses) > 0 {
		addresses = plan.addresses
	}
	if plan.clientPort != 0 {
		port = plan.clientPort
	}
	gwc, err := generators.GatewayClient(generators.GatewayClientOptions{
		Peer:      generators.Peer{RemoteClusterID: remoteID},
		Addresses: addresses, Port: port, MTU: o.mtu,
	})
	if err != nil {
		return err
	}
	if err := applyInTenant(ctx, local, gwc); err != nil {
		return err
	}
	local.p.infof("Gateway client %s applied, connecting to %s:%d", objectRef(gwc.Namespace, gwc.Name), strings.Join(addresses, ","), port)
	clientPub, err := waitPublicKey(ctx, local, generators.RoleClient, client.ObjectKeyFromObject(gwc))
	if err != nil {
		return err
	}
	local.p.infof("Gateway client correctly set up")

	// Public keys: the server's to the local cluster, the client's to the remote one.
	if o.disableSharingKeys {
		local.p.infof("Public keys not shared (--disable-sharing-keys): apply each gateway's PublicKey on the other cluster")
	} else {
		for _, s := range []struct {
			on    *side
			owner string
			key   []byte
		}{{local, remoteID, serverPub}, {remote, localID, clientPub}} {
			pk, err := generators.PublicKeyForPeer(s.owner, "", s.key)
			if err != nil {
				return err
			}
			if err := applyInTenant(ctx, s.on, pk); err != nil {
				return err
			}
			s.on.p.infof("Public key of %s's gateway applied", s.owner)
		}
	}

	if !o.wait {
		local.p.infof("Peering with %s set up; check the tunnel with `peerlink info peer %s`", remoteID, remoteID)
		return nil
	}
	for _, s := range []struct {
		on      *side
		gateway client.ObjectKey
	}{{local, client.ObjectKeyFromObject(gwc)}, {remote, serverKey}} {
		key := client.ObjectKey{Namespace: s.gateway.Namespace, Name: generators.GatewayObjectName(s.gateway.Name)}
		state, err := s.on.p.wait(ctx, "Connection "+key.String()+" to be Connected", func(ctx context.Context) (bool, string, error) {
			var conn netv1beta1.Connection
			if err := s.on.c.Get(ctx, key, &conn); err != nil {
				if apierrors.IsNotFound(err) {
					return false, "not created yet by the gateway agent", nil
				}
				return false, "", fmt.Errorf("get Connection %s: %w", key, err)
			}
			state := orNone(string(conn.Status.Value))
			if conn.Status.Latency.Value != "" {
				state += ", latency " + conn.Status.Latency.Value
			}
			return conn.Status.Value == netv1beta1.Connected, state, nil
		})
		if err != nil {
			return err
		}
		s.on.p.infof("Connection is established: %s", state)
	}
	return nil
}

// waitServerEndpoint waits until a GatewayServer publishes its endpoint for
// its current spec (a changed spec may move it), and reads it into server.
func waitServerEndpoint(ctx context.Context, p progress, c client.Client, key client.ObjectKey, server *netv1beta1.GatewayServer) error {
	_, err := p.wait(ctx, "the endpoint of gateway server "+key.String(), func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, key, server); err != nil {
			if apierrors.IsNotFound(err) {
				return false, "", fmt.Errorf("gatewayserver %s is gone", key)
			}
			return false, "", fmt.Errorf("get GatewayServer %s: %w", key, err)
		}
		ep := server.Status.Endpoint
		if server.Status.ObservedGeneration < server.Generation || ep == nil || len(ep.Addresses) == 0 || ep.Port == 0 {
			_, state := conditionState(server.Generation, server.Status.CommonStatus)
			return false, state, nil
		}
		return true, fmt.Sprintf("%s:%d", strings.Join(ep.Addresses, ","), ep.Port), nil
	})
	return err
}

// applyInTenant applies obj on a side, creating its namespace first.
func applyInTenant(ctx context.Context, s *side, obj client.Object) error {
	if err := ensureNamespace(ctx, s.c, obj.GetNamespace()); err != nil {
		return fmt.Errorf("%s cluster: %w", s.name, err)
	}
	if err := apply(ctx, s.c, obj); err != nil {
		return fmt.Errorf("%s cluster: %w", s.name, err)
	}
	return nil
}

// waitPublicKey waits until the controller has published a gateway's
// public key, and returns it.
func waitPublicKey(ctx context.Context, s *side, role generators.Role, gateway client.ObjectKey) ([]byte, error) {
	var key []byte
	_, err := s.p.wait(ctx, "the public key of gateway "+gateway.String(), func(ctx context.Context) (bool, string, error) {
		k, err := gatewayPublicKey(ctx, s.c, role, gateway)
		if errors.Is(err, errKeyPending) {
			return false, "key pair not made yet by the controller", nil
		}
		if err != nil {
			return false, "", err
		}
		key = k
		return true, "", nil
	})
	return key, err
}

func newDisconnectCmd(o *networkOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "disconnect",
		Short: "Remove the gateways and public keys of a peering, keeping the Configurations",
		Long: `Remove, on both clusters, the gateways (GatewayServer, GatewayClient) and the
PublicKeys of the peering, and wait until they are gone. The Configurations
stay, so a later connect keeps the same remapped ranges.`,
		Example: `  peerlink network disconnect --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig --skip-confirm`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.teardown(cmd, false)
		},
	}
	cmd.Flags().BoolVar(&o.skipConfirm, "skip-confirm", false, "do not ask for confirmation")
	return cmd
}

func newResetCmd(o *networkOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Remove everything of a peering: gateways, public keys, Configurations and empty tenant namespaces",
		Long: `Remove, on both clusters, the gateways, PublicKeys and Configurations of the
peering, wait until they are gone, then delete the tenant namespaces when
nothing else is left in them, and wait until they are gone too.`,
		Example: `  peerlink network reset --kubeconfig a.kubeconfig --remote-kubeconfig b.kubeconfig --skip-confirm`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.teardown(cmd, true)
		},
	}
	cmd.Flags().BoolVar(&o.skipConfirm, "skip-confirm", false, "do not ask for confirmation")
	return cmd
}

// teardown runs disconnect, or reset when all is set.
func (o *networkOptions) teardown(cmd *cobra.Command, all bool) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	local, remote, err := o.sides(ctx, out)
	if err != nil {
		return err
	}
	what := "the gateways and public keys"
	if all {
		what = "the gateways, public keys, Configurations and empty tenant namespaces"
	}
	if !o.skipConfirm {
		question := fmt.Sprintf("Remove %s of the peering between %s (local) and %s (remote)?", what, local.info.ClusterID, remote.info.ClusterID)
		if err := confirm(cmd.InOrStdin(), out, question); err != nil {
			return err
		}
	}
	kinds := []string{generators.KindGatewayClient, generators.KindGatewayServer, generators.KindPublicKey}
	for _, s := range []struct{ on, peer *side }{{local, remote}, {remote, local}} {
		if err := deletePeerObjects(ctx, s.on, s.peer.info.ClusterID, "gateways and public keys", kinds); err != nil {
			return err
		}
	}
	if !all {
		return nil
	}
	for _, s := range []struct{ on, peer *side }{{local, remote}, {remote, local}} {
		if err := deletePeerObjects(ctx, s.on, s.peer.info.ClusterID, "Configuration", []string{generators.KindConfiguration}); err != nil {
			return err
		}
	}
	for _, s := range []struct{ on, peer *side }{{local, remote}, {remote, local}} {
		if err := deleteTenantNamespace(ctx, s.on, s.peer.info.ClusterID); err != nil {
			return err
		}
	}
	return nil
}

// confirm asks a yes/no question on a terminal; without one it refuses, so
// scripts must say --skip-confirm.
func confirm(in io.Reader, out io.Writer, question string) error {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return errors.New("confirmation needed but stdin is not a terminal: pass --skip-confirm")
	}
	fmt.Fprintf(out, "%s [y/N]: ", question)
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errors.New("cancelled: nothing was removed")
}

// deletePeerObjects deletes the objects of the given kinds labelled for peer
// in its tenant namespace, and waits until they are gone, so nothing is left
// Terminating.
func deletePeerObjects(ctx context.Context, s *side, peer, what string, kinds []string) error {
	ns := generators.TenantNamespace(peer)
	sel := client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: peer}
	deleteLeft := func(ctx context.Context) ([]string, error) {
		var left []string
		for _, kind := range kinds {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(netv1beta1.GroupVersion.WithKind(kind + "List"))
			if err := s.c.List(ctx, list, client.InNamespace(ns), sel); err != nil {
				return nil, fmt.Errorf("list %s in %s: %w", kind, ns, err)
			}
			for i := range list.Items {
				obj := &list.Items[i]
				left = append(left, kind+" "+obj.Name)
				if obj.DeletionTimestamp != nil {
					continue
				}
				obj.SetGroupVersionKind(netv1beta1.GroupVersion.WithKind(kind))
				if err := s.c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
					return nil, fmt.Errorf("delete %s %s/%s: %w", kind, ns, obj.Name, err)
				}
			}
		}
		return left, nil
	}
	left, err := deleteLeft(ctx)
	if err != nil {
		return fmt.Errorf("%s cluster: %w", s.name, err)
	}
	if len(left) == 0 {
		s.p.infof("No %s of %s left in %s", what, peer, ns)
		return nil
	}
	if _, err := s.p.wait(ctx, "the "+what+" of "+peer+" to be deleted", func(ctx context.Context) (bool, string, error) {
		left, err := deleteLeft(ctx)
		if err != nil {
			return false, "", err
		}
		return len(left) == 0, "still there: " + strings.Join(left, ", "), nil
	}); err != nil {
		return err
	}
	s.p.infof("Deleted the %s of %s: %s", what, peer, strings.Join(left, ", "))
	return nil
}

// deleteTenantNamespace deletes the tenant namespace of peer when nothing
// but what peerlink put there is left, and waits until it is gone.
func deleteTenantNamespace(ctx context.Context, s *side, peer string) error {
	name := generators.TenantNamespace(peer)
	var ns corev1.Namespace
	if err := s.c.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			s.p.infof("Namespace %s already gone", name)
			return nil
		}
		return fmt.Errorf("%s cluster: get namespace %s: %w", s.name, name, err)
	}
	if ns.DeletionTimestamp == nil {
		others, err := foreignObjects(ctx, s, name, peer)
		if err != nil {
			return fmt.Errorf("%s cluster: %w", s.name, err)
		}
		if len(others) > 0 {
			s.p.infof("Namespace %s kept: it holds objects peerlink did not create: %s", name, strings.Join(others, ", "))
			return nil
		}
		if err := s.c.Delete(ctx, &ns); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s cluster: delete namespace %s: %w", s.name, name, err)
		}
	}
	if _, err := s.p.wait(ctx, "namespace "+name+" to be deleted", func(ctx context.Context) (bool, string, error) {
		var ns corev1.Namespace
		err := s.c.Get(ctx, client.ObjectKey{Name: name}, &ns)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", fmt.Errorf("get namespace %s: %w", name, err)
		}
		return false, namespaceState(&ns), nil
	}); err != nil {
		return err
	}
	s.p.infof("Namespace %s deleted", name)
	return nil
}

// namespaceState tells why a namespace is still Terminating, from the
// conditions the namespace controller sets.
func namespaceState(ns *corev1.Namespace) string {
	var msgs []string
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue && c.Message != "" {
			msgs = append(msgs, c.Message)
		}
	}
	if len(msgs) == 0 {
		return string(ns.Status.Phase)
	}
	return strings.Join(msgs, "; ")
}

// foreignObjects lists the objects of a tenant namespace that neither
// peerlink nor Kubernetes put there. Derived objects (owned by another
// object, or labelled for the peer) are being garbage collected; the default
// ServiceAccount, the root CA ConfigMap and Events come with every
// namespace. When the API cannot be listed completely, nothing counts as
// empty: deleting a namespace would delete what could not be seen.
func foreignObjects(ctx context.Context, s *side, ns, peer string) ([]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(s.cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil {
		return nil, fmt.Errorf("discover the namespaced resources to check %s is empty: %w", ns, err)
	}
	var found []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || r.Kind == "Event" {
				continue
			}
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gv.WithKind(r.Kind + "List"))
			if err := s.c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return nil, fmt.Errorf("list %s in %s: %w", r.Name, ns, err)
			}
			for _, obj := range list.Items {
				if inherent(r.Kind, &obj, peer) {
					continue
				}
				found = append(found, r.Kind+" "+obj.Name)
			}
		}
	}
	slices.Sort(found)
	return found, nil
}

// inherent tells whether an object of a tenant namespace goes away with the
// peering or comes with any namespace.
func inherent(kind string, obj *metav1.PartialObjectMetadata, peer string) bool {
	switch {
	case len(obj.OwnerReferences) > 0, obj.Labels[netv1beta1.RemoteClusterIDLabel] == peer:
		return true
	case kind == "ServiceAccount" && obj.Name == "default",
		kind == "ConfigMap" && obj.Name == "kube-root-ca.crt":
		return true
	}
	return false
}
