package cli

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/manifests"
)

// serverFlagNames are the names a command gives the flags of a gateway
// server.
type serverFlagNames struct {
	serviceType, port, nodePort, loadBalancerIP string
}

var (
	// createServerFlags are the names of create gatewayserver and bundle
	// init.
	createServerFlags = serverFlagNames{"service-type", "port", "node-port", "load-balancer-ip"}
	// connectServerFlags are the names of network connect, those of the
	// reference CLI's documents; connectServerAliases are the longer names
	// it also takes.
	connectServerFlags   = serverFlagNames{"server-service-type", "server-port", "node-port", "load-balancer-ip"}
	connectServerAliases = serverFlagNames{"gw-server-service-type", "gw-server-service-port", "gw-server-service-nodeport", "gw-server-service-loadbalancerip"}
)

// serverFlags are the flags of a gateway server: create gatewayserver,
// bundle init --role server and network connect take them, under their own
// names, with one set of rules.
type serverFlags struct {
	names, aliases serverFlagNames
	set            *pflag.FlagSet
	serviceType    string
	port, nodePort int32
	loadBalancerIP string
}

// register adds the flags to cmd, and each of aliases as another name of
// the same flag; usage prefixes each description. The port flag is left to
// a command that shares it with other uses (create, bundle init), when
// withPort is false.
func (s *serverFlags) register(cmd *cobra.Command, names serverFlagNames, usage string, withPort bool, aliases ...serverFlagNames) {
	s.names, s.set = names, cmd.Flags()
	f := cmd.Flags()
	for _, a := range aliases {
		s.aliases = a
		f.StringVar(&s.serviceType, a.serviceType, string(corev1.ServiceTypeLoadBalancer), "same as --"+names.serviceType)
		f.Int32Var(&s.port, a.port, netv1beta1.DefaultGatewayPort, "same as --"+names.port)
		f.Int32Var(&s.nodePort, a.nodePort, 0, "same as --"+names.nodePort)
		f.StringVar(&s.loadBalancerIP, a.loadBalancerIP, "", "same as --"+names.loadBalancerIP)
	}
	f.StringVar(&s.serviceType, names.serviceType, string(corev1.ServiceTypeLoadBalancer), usage+"type of the gateway Service: LoadBalancer, NodePort or ClusterIP")
	if withPort {
		f.Int32Var(&s.port, names.port, netv1beta1.DefaultGatewayPort, usage+"WireGuard port of the gateway Service")
	}
	f.Int32Var(&s.nodePort, names.nodePort, 0, usage+"pin the node port (NodePort or LoadBalancer); default: allocated by Kubernetes")
	f.StringVar(&s.loadBalancerIP, names.loadBalancerIP, "", usage+"address to request from the load balancer (LoadBalancer)")
	_ = cmd.RegisterFlagCompletionFunc(names.serviceType, cobra.FixedCompletions(
		[]string{"LoadBalancer", "NodePort", "ClusterIP"}, cobra.ShellCompDirectiveNoFileComp))
}

// given returns the names the flags were given by: an alias set on the
// command line names its flag in errors.
func (s *serverFlags) given() serverFlagNames {
	n := s.names
	for _, f := range []struct{ name, alias *string }{
		{&n.serviceType, &s.aliases.serviceType}, {&n.port, &s.aliases.port},
		{&n.nodePort, &s.aliases.nodePort}, {&n.loadBalancerIP, &s.aliases.loadBalancerIP},
	} {
		if *f.alias != "" && s.set.Changed(*f.alias) {
			*f.name = *f.alias
		}
	}
	return n
}

// options checks the flags and returns the server they describe, with mtu
// and the template given; the peer is the caller's to set. Errors name the
// flags.
func (s *serverFlags) options(mtu int, tmplName, tmplNS string) (manifests.GatewayServerOptions, error) {
	names := s.given()
	if s.port == 0 {
		return manifests.GatewayServerOptions{}, fmt.Errorf("--%s: the port must be set", names.port)
	}
	typ, err := manifests.ParseServiceType(s.serviceType)
	if err != nil {
		return manifests.GatewayServerOptions{}, fmt.Errorf("--%s: %w", names.serviceType, err)
	}
	o := manifests.GatewayServerOptions{ServiceType: typ, Port: s.port, NodePort: s.nodePort, MTU: mtu,
		TemplateName: tmplName, TemplateNamespace: tmplNS}
	if s.loadBalancerIP != "" {
		addr, err := netip.ParseAddr(s.loadBalancerIP)
		if err != nil || addr.Zone() != "" {
			return manifests.GatewayServerOptions{}, fmt.Errorf("--%s: %q is not an IP address", names.loadBalancerIP, s.loadBalancerIP)
		}
		o.LoadBalancerIP = addr
	}
	return o, manifests.WithNames(o.Validate(), map[string]string{
		"spec.endpoint.port":           "--" + names.port,
		"spec.endpoint.nodePort":       "--" + names.nodePort,
		"spec.endpoint.loadBalancerIP": "--" + names.loadBalancerIP,
		"spec.mtu":                     "--mtu",
	})
}

// gatewayFlags are the flags of a gateway of either role, which create
// gatewayserver, create gatewayclient and bundle init build one way: the
// server's, the client's (the server's addresses, and the port, which is
// the server's too), the tunnel's MTU, the replicas and the template.
type gatewayFlags struct {
	server           serverFlags
	addresses        []string
	protocol         string
	mtu              int
	replicas         int32
	tmplName, tmplNS string
	// portNeeded says why a client needs a port; portOptional lets a
	// client without addresses go without one (bundle init).
	portNeeded   string
	portOptional bool
}

// addCommon adds the flags of both roles but the server's and the client's
// own.
func (f *gatewayFlags) addCommon(cmd *cobra.Command, defaultTemplate, templateUsage, namespaceUsage string) {
	flags := cmd.Flags()
	flags.IntVar(&f.mtu, "mtu", netv1beta1.DefaultMTU, "MTU of the tunnel; both sides must agree")
	flags.Int32Var(&f.replicas, "replicas", 0, "number of gateway pods: one carries the tunnel, the others stand by to take over (default: the API's, one)")
	flags.StringVar(&f.tmplName, "template-name", defaultTemplate, templateUsage)
	flags.StringVar(&f.tmplNS, "template-namespace", "", namespaceUsage+" (default: the controller's namespace)")
}

// build checks the flags and builds the gateway of role for the peer p,
// whose ID is given by idFlag; errors name the flags.
func (f *gatewayFlags) build(role gatewayrole.Role, p manifests.Peer, idFlag string) (client.Object, error) {
	fields := map[string]string{
		"metadata.name": "NAME", manifests.RemoteClusterIDPath().String(): idFlag,
		"spec.endpoint.port": "--port", "spec.mtu": "--mtu", "spec.replicas": "--replicas",
	}
	if role == gatewayrole.Server {
		o, err := f.server.options(f.mtu, f.tmplName, f.tmplNS)
		if err != nil {
			return nil, err
		}
		o.Peer, o.Replicas = p, f.replicas
		gw, err := manifests.GatewayServer(o)
		return gw, manifests.WithNames(err, fields)
	}
	port := f.server.port
	if port == 0 && !f.portOptional {
		return nil, errors.New("--port: " + f.portNeeded)
	}
	if f.protocol != "" && corev1.Protocol(f.protocol) != corev1.ProtocolUDP {
		return nil, fmt.Errorf("--protocol: %q is not supported: WireGuard speaks UDP", f.protocol)
	}
	addrs, err := manifests.ParseAddressList(f.addresses...)
	if err != nil {
		return nil, fmt.Errorf("--addresses: %w", err)
	}
	if port == 0 && len(addrs) > 0 {
		return nil, errors.New("--port: " + f.portNeeded)
	}
	gw, err := manifests.GatewayClient(manifests.GatewayClientOptions{
		Peer: p, Addresses: addrs, Port: port, Protocol: corev1.Protocol(f.protocol), MTU: f.mtu, Replicas: f.replicas,
		TemplateName: f.tmplName, TemplateNamespace: f.tmplNS,
	})
	return gw, manifests.WithNames(err, fields)
}
