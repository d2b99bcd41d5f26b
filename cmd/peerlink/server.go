package main

import (
	"fmt"
	"net/netip"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/generators"
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
	// reference CLI.
	connectServerFlags = serverFlagNames{"gw-server-service-type", "gw-server-service-port", "gw-server-service-nodeport", "gw-server-service-loadbalancerip"}
)

// serverFlags are the flags of a gateway server: create gatewayserver,
// bundle init --role server and network connect take them, under their own
// names, with one set of rules.
type serverFlags struct {
	names          serverFlagNames
	serviceType    string
	port, nodePort int32
	loadBalancerIP string
}

// register adds the flags to cmd; usage prefixes each description. The port
// flag is left to a command that shares it with other uses (bundle init),
// when withPort is false.
func (s *serverFlags) register(cmd *cobra.Command, names serverFlagNames, usage string, withPort bool) {
	s.names = names
	f := cmd.Flags()
	f.StringVar(&s.serviceType, names.serviceType, string(corev1.ServiceTypeLoadBalancer), usage+"type of the gateway Service: LoadBalancer, NodePort or ClusterIP")
	if withPort {
		f.Int32Var(&s.port, names.port, netv1beta1.DefaultGatewayPort, usage+"WireGuard port of the gateway Service")
	}
	f.Int32Var(&s.nodePort, names.nodePort, 0, usage+"pin the node port (NodePort or LoadBalancer); default: allocated by Kubernetes")
	f.StringVar(&s.loadBalancerIP, names.loadBalancerIP, "", usage+"address to request from the load balancer (LoadBalancer)")
	_ = cmd.RegisterFlagCompletionFunc(names.serviceType, cobra.FixedCompletions(
		[]string{"LoadBalancer", "NodePort", "ClusterIP"}, cobra.ShellCompDirectiveNoFileComp))
}

// changed lists the server flags set on cmd, the port aside.
func (s *serverFlags) changed(cmd *cobra.Command) []string {
	var out []string
	for _, n := range []string{s.names.serviceType, s.names.nodePort, s.names.loadBalancerIP} {
		if cmd.Flags().Changed(n) {
			out = append(out, n)
		}
	}
	return out
}

// options checks the flags and returns the server they describe, with mtu
// and the template given; the peer is the caller's to set. Errors name the
// flags.
func (s *serverFlags) options(mtu int, tmplName, tmplNS string) (generators.GatewayServerOptions, error) {
	if s.port == 0 {
		return generators.GatewayServerOptions{}, fmt.Errorf("--%s: the port must be set", s.names.port)
	}
	typ, err := generators.ParseServiceType(s.serviceType)
	if err != nil {
		return generators.GatewayServerOptions{}, fmt.Errorf("--%s: %w", s.names.serviceType, err)
	}
	o := generators.GatewayServerOptions{ServiceType: typ, Port: s.port, NodePort: s.nodePort, MTU: mtu,
		TemplateName: tmplName, TemplateNamespace: tmplNS}
	if s.loadBalancerIP != "" {
		addr, err := netip.ParseAddr(s.loadBalancerIP)
		if err != nil || !addr.Is4() {
			return generators.GatewayServerOptions{}, fmt.Errorf("--%s: %q is not an IPv4 address", s.names.loadBalancerIP, s.loadBalancerIP)
		}
		o.LoadBalancerIP = addr
	}
	if err := o.Validate(); err != nil {
		return generators.GatewayServerOptions{}, flagErrors(err, map[string]string{
			"spec.endpoint.port":           "--" + s.names.port,
			"spec.endpoint.nodePort":       "--" + s.names.nodePort,
			"spec.endpoint.loadBalancerIP": "--" + s.names.loadBalancerIP,
			"spec.mtu":                     "--mtu",
		})
	}
	return o, nil
}
