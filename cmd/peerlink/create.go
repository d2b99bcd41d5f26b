package main

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/generators"
	"github.com/peerlink/peerlink/peerbundle"
	"github.com/peerlink/peerlink/peering"
)

// defaultTimeout bounds each wait of the commands that wait.
const defaultTimeout = 120 * time.Second

func newCreateCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a peering object, or print its manifest with -o",
		Long: `Create a Configuration, GatewayServer, GatewayClient or PublicKey for a peer.

With -o yaml|json the manifest is printed and nothing else happens: no cluster
is needed. Without -o the object is applied to the cluster (server-side apply,
field manager peerlink), creating its namespace when needed; --wait then waits
until the controller reports it Ready.

Objects are named after the peer (--remote-cluster-id) unless NAME is given, and
go to the namespace liqo-tenant-<remote cluster id> unless -n is given.`,
		Example: `  # Print a GatewayServer for peer cluster-a, to review or commit
  peerlink create gatewayserver --remote-cluster-id cluster-a --service-type NodePort -o yaml

  # Apply a Configuration for peer cluster-b and wait until it is Ready
  peerlink create configuration --remote-cluster-id cluster-b --pod-cidr 10.244.0.0/16 --wait`,
	}
	cmd.AddCommand(
		newCreateConfigurationCmd(g),
		newCreateGatewayServerCmd(g),
		newCreateGatewayClientCmd(g),
		newCreatePublicKeyCmd(g),
	)
	return cmd
}

// createCommon are the flags every create subcommand has.
type createCommon struct {
	remoteClusterID string
	output          string
	wait            bool
	timeout         time.Duration
}

func (c *createCommon) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.remoteClusterID, "remote-cluster-id", "", "ID of the peer cluster the object is for (required)")
	_ = cmd.MarkFlagRequired("remote-cluster-id")
	addOutputFlag(cmd, &c.output, "")
	cmd.Flags().BoolVar(&c.wait, "wait", false, "wait until the object is Ready (without -o)")
	cmd.Flags().DurationVar(&c.timeout, "timeout", defaultTimeout, "how long --wait waits")
}

// peer checks the flags naming the object and returns where it goes.
func (c *createCommon) peer(g *globalOptions, args []string) (generators.Peer, error) {
	name := ""
	if len(args) > 0 {
		name = args[0]
	}
	return peerOf("--remote-cluster-id", c.remoteClusterID, g.namespace(), name)
}

// peerOf checks the peer's cluster ID, given by flag, and the namespace of
// -n, and returns where the objects for that peer go.
func peerOf(flag, id, namespace, name string) (generators.Peer, error) {
	if err := clusterinfo.ValidateClusterID(id); err != nil {
		return generators.Peer{}, fmt.Errorf("%s: %w", flag, err)
	}
	if namespace != "" {
		if err := generators.ValidateNamespace(namespace); err != nil {
			return generators.Peer{}, fmt.Errorf("--namespace: %w", err)
		}
	}
	return generators.Peer{RemoteClusterID: id, Namespace: namespace, Name: name}, nil
}

// commonFieldFlags name the flags behind the fields every object has, and
// the further field and flag pairs given.
func commonFieldFlags(pairs ...string) map[string]string {
	m := map[string]string{
		"metadata.name": "NAME",
		generators.RemoteClusterIDPath().String(): "--remote-cluster-id",
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

// command completes cmd, a create subcommand taking an optional NAME: its
// flags are c's beside its own, and it builds its object for the peer with
// build, then finishes.
func (c *createCommon) command(g *globalOptions, cmd *cobra.Command, build func(generators.Peer) (client.Object, error)) *cobra.Command {
	cmd.Args = cobra.MaximumNArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p, err := c.peer(g, args)
		if err != nil {
			return err
		}
		obj, err := build(p)
		if err != nil {
			return err
		}
		return c.finish(cmd, g, obj)
	}
	c.addFlags(cmd)
	return cmd
}

// finish prints the object with -o, or applies it and, with --wait, waits
// until it is Ready.
func (c *createCommon) finish(cmd *cobra.Command, g *globalOptions, obj client.Object) error {
	if c.output != "" {
		return printObjects(cmd.OutOrStdout(), c.output, obj)
	}
	cl, err := g.localClient(cmd.Context())
	if err != nil {
		return err
	}
	return peering.Create(cmd.Context(), cl, peering.Progress{Out: cmd.OutOrStdout(), Timeout: c.timeout}, obj, c.wait)
}

// templateFlags are the flags both gateway subcommands have: the tunnel's
// MTU, the gateway's replicas and the template the gateway is rendered
// from.
type templateFlags struct {
	mtu              int
	replicas         int32
	tmplName, tmplNS string
}

func (t *templateFlags) addFlags(cmd *cobra.Command, kind, defaultName string) {
	f := cmd.Flags()
	f.IntVar(&t.mtu, "mtu", netv1beta1.DefaultMTU, "MTU of the tunnel; both sides must agree")
	f.Int32Var(&t.replicas, "replicas", 0, "number of gateway pods: one carries the tunnel, the others stand by to take over (default: the API's, one)")
	f.StringVar(&t.tmplName, "template-name", defaultName, "name of the "+kind)
	f.StringVar(&t.tmplNS, "template-namespace", "", "namespace of the template (default: the controller's namespace)")
}

func newCreateConfigurationCmd(g *globalOptions) *cobra.Command {
	var c createCommon
	var pod, external, placements []string
	var factFlags peerFactFlags
	cmd := c.command(g, &cobra.Command{
		Use:   "configuration [NAME]",
		Short: "Declare the network of a peer cluster",
		Long: `Create the Configuration that declares the network of a peer cluster: its
pod CIDRs and external CIDRs, as the peer has them.

Each range is held to the rules the controller applies: IPv4 only, never a
special-use range, at most 64 per list, inside the allowlist.

` + peerFactsHelp + `

Create reports the peer's ranges as bundle add does, also without a plan
(every range is then remapped), on standard error: -o keeps standard output
to the manifest.`,
		Example: `  # Print the Configuration of peer cluster-b, to commit or apply elsewhere
  peerlink create configuration --remote-cluster-id cluster-b \
    --pod-cidr 10.244.0.0/16 --external-cidr 10.70.0.0/16 -o yaml

  # The same, held to this cluster's allowlist and address plan for peers
  peerlink info -o yaml > cluster-a.yaml
  peerlink create configuration --remote-cluster-id cluster-b \
    --pod-cidr 10.244.0.0/16 --cluster-info cluster-a.yaml -o yaml

  # Apply it and wait until the controller has mapped the peer's CIDRs
  peerlink create configuration --remote-cluster-id cluster-b --pod-cidr 10.244.0.0/16 --wait`,
	}, func(p generators.Peer) (client.Object, error) {
		facts, err := factFlags.load()
		if err != nil {
			return nil, err
		}
		pods, err := generators.ParseCIDRList(pod...)
		if err != nil {
			return nil, fmt.Errorf("--pod-cidr: %w", err)
		}
		if len(pods) == 0 {
			return nil, fmt.Errorf("--pod-cidr: at least one pod CIDR of the peer is needed")
		}
		ext, err := generators.ParseCIDRList(external...)
		if err != nil {
			return nil, fmt.Errorf("--external-cidr: %w", err)
		}
		conf, err := generators.Configuration(generators.ConfigurationOptions{Peer: p, PodCIDRs: pods, ExternalCIDRs: ext})
		if err != nil {
			return nil, flagErrors(err, commonFieldFlags("spec.remote.cidr.pod", "--pod-cidr", "spec.remote.cidr.external", "--external-cidr"))
		}
		for _, l := range []struct {
			flag   string
			ranges []netip.Prefix
		}{{"--pod-cidr", pods}, {"--external-cidr", ext}} {
			for _, r := range l.ranges {
				if err := facts.policy.Check(r); err != nil {
					return nil, fmt.Errorf("%s: %w (%s)", l.flag, err, facts.allowedFrom)
				}
			}
		}
		placements = peerbundle.PeerRangePlacements(conf, facts.policy)
		return conf, nil
	})
	// The placements follow what was printed or applied: a command that
	// fails says only why.
	create := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := create(cmd, args); err != nil {
			return err
		}
		for _, pl := range placements {
			if _, err := fmt.Fprintf(cmd.ErrOrStderr(), "INFO   peer range %s\n", pl); err != nil {
				return err
			}
		}
		return nil
	}
	cmd.Flags().StringArrayVar(&pod, "pod-cidr", nil, "pod CIDR of the peer (repeatable, or a comma-separated list)")
	cmd.Flags().StringArrayVar(&external, "external-cidr", nil, "external CIDR of the peer (repeatable, or a comma-separated list)")
	factFlags.register(cmd)
	return cmd
}

func newCreateGatewayServerCmd(g *globalOptions) *cobra.Command {
	var c createCommon
	var server serverFlags
	var t templateFlags
	cmd := c.command(g, &cobra.Command{
		Use:     "gatewayserver [NAME]",
		Aliases: []string{"gws", "gwserver"},
		Short:   "Create the server side of the tunnel to a peer",
		Example: `  # A server exposed on a fixed node port, printed for review
  peerlink create gatewayserver --remote-cluster-id cluster-a \
    --service-type NodePort --node-port 30851 -o yaml

  # Apply a LoadBalancer server and wait until it publishes its endpoint
  peerlink create gatewayserver --remote-cluster-id cluster-a --wait`,
	}, func(p generators.Peer) (client.Object, error) {
		o, err := server.options(t.mtu, t.tmplName, t.tmplNS)
		if err != nil {
			return nil, err
		}
		o.Peer, o.Replicas = p, t.replicas
		gw, err := generators.GatewayServer(o)
		if err != nil {
			return nil, flagErrors(err, commonFieldFlags("spec.replicas", "--replicas"))
		}
		return gw, nil
	})
	server.register(cmd, createServerFlags, "", true)
	t.addFlags(cmd, "WgGatewayServerTemplate", netv1beta1.DefaultServerTemplateName)
	return cmd
}

func newCreateGatewayClientCmd(g *globalOptions) *cobra.Command {
	var c createCommon
	var addresses []string
	var protocol string
	var port int32
	var t templateFlags
	cmd := c.command(g, &cobra.Command{
		Use:     "gatewayclient [NAME]",
		Aliases: []string{"gwc", "gwclient"},
		Short:   "Create the client side of the tunnel to a peer",
		Long: `Create the client side of the tunnel to a peer.

--addresses and --port are where the peer's GatewayServer is reachable (its
status.endpoint). Without --addresses the client is a placeholder: the
controller creates its keys and reports WaitingForEndpoint until the endpoint
is filled in.`,
		Example: `  # A client of the server the peer published at 172.18.0.3:30851
  peerlink create gatewayclient --remote-cluster-id cluster-b \
    --addresses 172.18.0.3 --port 30851 -o yaml`,
	}, func(p generators.Peer) (client.Object, error) {
		if port == 0 {
			return nil, errors.New("--port: the server's port is needed")
		}
		if corev1.Protocol(protocol) != corev1.ProtocolUDP {
			return nil, fmt.Errorf("--protocol: %q is not supported: WireGuard speaks UDP", protocol)
		}
		addrs, err := generators.ParseAddressList(addresses...)
		if err != nil {
			return nil, fmt.Errorf("--addresses: %w", err)
		}
		gw, err := generators.GatewayClient(generators.GatewayClientOptions{
			Peer: p, Addresses: addrs, Port: port, Protocol: corev1.Protocol(protocol), MTU: t.mtu, Replicas: t.replicas,
			TemplateName: t.tmplName, TemplateNamespace: t.tmplNS,
		})
		if err != nil {
			return nil, flagErrors(err, commonFieldFlags("spec.endpoint.port", "--port", "spec.mtu", "--mtu", "spec.replicas", "--replicas"))
		}
		return gw, nil
	})
	f := cmd.Flags()
	f.StringArrayVar(&addresses, "addresses", nil, "addresses of the peer's gateway server (repeatable, or a comma-separated list)")
	f.Int32Var(&port, "port", netv1beta1.DefaultGatewayPort, "port of the peer's gateway server")
	f.StringVar(&protocol, "protocol", string(corev1.ProtocolUDP), "transport protocol of the tunnel: UDP")
	t.addFlags(cmd, "WgGatewayClientTemplate", netv1beta1.DefaultClientTemplateName)
	return cmd
}

func newCreatePublicKeyCmd(g *globalOptions) *cobra.Command {
	var c createCommon
	var key string
	cmd := c.command(g, &cobra.Command{
		Use:     "publickey [NAME]",
		Aliases: []string{"pk", "pkey"},
		Short:   "Hand the public key of a peer's gateway to this cluster",
		Long: `Create the PublicKey of a peer's gateway. --remote-cluster-id is the peer, the
cluster that owns the key; --public-key is the key as wg pubkey prints it (the
base64 of 32 bytes).`,
		Example: `  peerlink create publickey --remote-cluster-id cluster-b \
    --public-key 'jP7cM1l5b7nJ8a9N0fQ8nL2S0yq3q8c1b2Yx3cQmE2M=' -o yaml`,
	}, func(p generators.Peer) (client.Object, error) {
		// A key pasted on the command line may carry the line break
		// wg pubkey prints; a manifest's may not, as the CRD says.
		raw, err := generators.ParsePublicKey(strings.TrimSpace(key))
		if err != nil {
			return nil, fmt.Errorf("--public-key: %w", err)
		}
		pk, err := generators.PublicKey(generators.PublicKeyOptions{Peer: p, Key: raw})
		if err != nil {
			return nil, flagErrors(err, commonFieldFlags())
		}
		return pk, nil
	})
	cmd.Flags().StringVar(&key, "public-key", "", "the peer gateway's public key, base64 as wg pubkey prints it (required)")
	_ = cmd.MarkFlagRequired("public-key")
	return cmd
}
