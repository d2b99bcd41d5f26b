package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/peerlink/peerlink/api/gatewayrole"
	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/dataplane/gateway"
	"github.com/peerlink/peerlink/dataplane/wireguard"
	"github.com/peerlink/peerlink/internal/choice"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/mcs"
)

// gatewayFlags are the flags of `peerlink-agent gateway`.
type gatewayFlags struct {
	agentFlags

	name, clusterID, mode, uid string
	listenPort, endpointPort   int
	endpointAddresses          string
	keyDir                     string
	keepalive, pingInterval    time.Duration
	wireguardImpl              string
	localCIDRs                 string
	serviceLimits              string
	unknownSource              string
	leaderElect                bool
	podName                    string
	leaseDuration, leaseRenew  time.Duration
	leaseRetry                 time.Duration
}

func newGatewayCommand() *cobra.Command {
	var f gatewayFlags
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run the gateway of one peering, in the gateway pod",
		Long: `Run the gateway agent in the network namespace of a gateway pod: the
WireGuard link peerlink-tunnel (kernel WireGuard when the kernel has it, the
embedded wireguard-go otherwise), the overlay link to the cluster's nodes,
the NAT between the peer's real and remapped ranges, routes, health pings
over the tunnel and the Connection gw-<name>.

It needs CAP_NET_ADMIN, and /dev/net/tun for the userspace WireGuard.`,
	}
	return subcommand(cmd, f.addFlags, f.options, func(opts gateway.Options) error { return runGateway(f, opts) })
}

func (f *gatewayFlags) addFlags(fs *pflag.FlagSet) {
	f.processFlags.addFlags(fs, ":8081", ":8082", "")
	f.agentFlags.addFlags(fs, agentFlagHelp{
		namespace:   "namespace of the gateway object (required)",
		nodeIP:      "address of the node running the pod (default: the NODE_IP variable); traffic from the tunnel goes to it through the overlay",
		overlayPeer: "the fabric's",
		mtu:         "MTU of the tunnel; 0 takes the gateway object's spec.mtu", mtuDefault: netv1beta1.DefaultMTU,
	})

	fs.StringVar(&f.name, "name", "", "name of the GatewayServer or GatewayClient (required)")
	fs.StringVar(&f.clusterID, "remote-cluster-id", "", "cluster ID of the peer (required)")
	fs.StringVar(&f.mode, "mode", "", "server or client (required)")
	fs.StringVar(&f.uid, "gateway-uid", "", "UID of the gateway object, for the Connection's owner reference")
	fs.IntVar(&f.listenPort, "listen-port", 0, "WireGuard port of a server")
	fs.StringVar(&f.endpointAddresses, "endpoint-address", "", "comma-separated addresses of the server, for a client; empty: read them from the GatewayClient")
	fs.IntVar(&f.endpointPort, "endpoint-port", 0, "port of the server, for a client; 0: read it from the GatewayClient")
	fs.StringVar(&f.keyDir, "key-dir", "/etc/peerlink/keys", "directory of the mounted key Secret (files privateKey and publicKey)")
	fs.DurationVar(&f.keepalive, "keepalive", 25*time.Second, "WireGuard persistent keepalive; 0 disables it")
	fs.DurationVar(&f.pingInterval, "ping-interval", time.Second, "interval of the health pings over the tunnel")
	fs.StringVar(&f.wireguardImpl, "wireguard-implementation", string(wireguard.Auto), "auto, kernel or userspace")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "one of several replicas: stand by until this pod holds the Lease gw-<name>, then carry the tunnel and label the pod "+netv1beta1.ActiveGatewayLabel+"=true")
	fs.StringVar(&f.podName, "pod-name", os.Getenv("POD_NAME"), "name of the gateway pod, the Lease holder's identity (default: the POD_NAME variable)")
	fs.DurationVar(&f.leaseDuration, "lease-duration", 4*time.Second, "with --leader-elect: how long a standby waits for an active replica that stopped renewing the Lease (its node gone)")
	fs.DurationVar(&f.leaseRenew, "lease-renew-deadline", 3*time.Second, "with --leader-elect: how long the active replica tries to renew the Lease")
	fs.DurationVar(&f.leaseRetry, "lease-retry-period", 250*time.Millisecond, "with --leader-elect: pace of the Lease's renewals and of a standby's attempts to take it, so the time it takes to notice a released Lease")
	fs.StringVar(&f.unknownSource, "unknown-source", os.Getenv(netv1beta1.UnknownSourceEnv), "this cluster's unknown-source address (the first of its external CIDR), which the nodes' own packets leave the gateway as (default: the "+netv1beta1.UnknownSourceEnv+" variable, which the controller sets; without it they are not translated)")
	fs.StringVar(&f.serviceLimits, "service-limits", os.Getenv(netv1beta1.ServiceLimitsEnv), "limits of what the peer may export to this cluster, as services=N,endpoints=N,total-endpoints=N,document-bytes=N,... (default: the "+netv1beta1.ServiceLimitsEnv+" variable, which the controller sets when its own are not the defaults; the limits not named take the defaults)")
	fs.StringVar(&f.localCIDRs, "local-cidr", os.Getenv(netv1beta1.LocalCIDRsEnv), "comma-separated pod and external CIDRs of this cluster, the only destinations allowed out of the tunnel (default: the "+netv1beta1.LocalCIDRsEnv+" variable, which the controller sets; required)")
}

// gatewayMaxMisses is how many unanswered pings in a row make a tunnel's
// Connection Error: with the default interval, a peer gone is known in
// about 3 s, and its Services' endpoints leave the imports then.
const gatewayMaxMisses = 3

// options parses the flags; errors name them.
func (f *gatewayFlags) options() (gateway.Options, error) {
	role, err := gatewayrole.Parse(f.mode)
	if err != nil {
		return gateway.Options{}, fmt.Errorf("--mode: %w", err)
	}
	impl, err := choice.Parse("wireguard implementation", f.wireguardImpl, wireguard.Auto, wireguard.Kernel, wireguard.Userspace)
	if err != nil {
		return gateway.Options{}, fmt.Errorf("--wireguard-implementation: %w", err)
	}
	common, err := f.agentFlags.options()
	if err != nil {
		return gateway.Options{}, err
	}
	o := gateway.Options{
		AgentOptions:      common,
		Name:              f.name,
		RemoteClusterID:   f.clusterID,
		Role:              role,
		GatewayUID:        types.UID(f.uid),
		ListenPort:        f.listenPort,
		EndpointAddresses: commaList(f.endpointAddresses),
		EndpointPort:      f.endpointPort,
		KeyDir:            f.keyDir,
		Keepalive:         f.keepalive,
		PingInterval:      f.pingInterval,
		MaxMisses:         gatewayMaxMisses,
		WireGuard:         impl,
	}
	for _, s := range commaList(f.localCIDRs) {
		p, err := cidr.ParseNetwork(s)
		if err != nil {
			return gateway.Options{}, fmt.Errorf("--local-cidr: %w", err)
		}
		o.LocalRanges = append(o.LocalRanges, p)
	}
	if f.unknownSource != "" {
		if o.UnknownSource, err = netip.ParseAddr(f.unknownSource); err != nil {
			return gateway.Options{}, fmt.Errorf("--unknown-source: %w", err)
		}
	}
	if o.ServiceLimits, err = mcs.ParseLimits(f.serviceLimits); err != nil {
		return gateway.Options{}, fmt.Errorf("--service-limits: %w", err)
	}
	return o, field.WithFlags(o.Validate(), withAgentFlags(map[string]string{
		"Name": "--name", "RemoteClusterID": "--remote-cluster-id", "Role": "--mode",
		"ListenPort": "--listen-port", "EndpointPort": "--endpoint-port", "KeyDir": "--key-dir",
		"Keepalive": "--keepalive", "PingInterval": "--ping-interval", "LocalRanges": "--local-cidr", "UnknownSource": "--unknown-source",
	}))
}

// runGateway runs the gateway agent under a manager whose cache sees only
// the gateway's namespace, until SIGTERM or SIGINT.
func runGateway(f gatewayFlags, opts gateway.Options) error {
	mgr, log, err := f.newManager(func(_ *rest.Config, mgrOpts *ctrl.Options) {
		// The IPs of every namespace: the hosts this cluster remaps are
		// reachable through every peering.
		mgrOpts.Cache = cache.Options{
			DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
			ByObject:          map[client.Object]cache.ByObject{&ipamv1alpha1.IP{}: {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}}},
		}
		// The agent writes its Connection and never reads it back.
		mgrOpts.Client = client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&netv1beta1.Connection{}}}}
	}, "gateway", opts.Namespace+"/"+opts.Name)
	if err != nil {
		return err
	}
	var election *gateway.Election
	if f.leaderElect {
		if election, err = f.election(mgr.GetConfig(), opts); err != nil {
			return err
		}
	}
	agent, err := gateway.New(opts, mgr.GetClient(), mgr.GetCache(), election, log)
	if err != nil {
		return err
	}
	if err := ctrlmetrics.Registry.Register(agent.Collector()); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	log.Info("starting gateway agent", "mode", opts.Role, "remoteClusterID", opts.RemoteClusterID)
	return serveAgent(mgr, agent)
}

// election builds the Lease election of the gateway's replicas: the Lease
// gw-<name> in the gateway's namespace, held under the pod's name.
func (f gatewayFlags) election(cfg *rest.Config, opts gateway.Options) (*gateway.Election, error) {
	if f.podName == "" {
		return nil, errors.New("--leader-elect needs --pod-name (or the POD_NAME variable)")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for the Lease: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, opts.Namespace, netv1beta1.GatewayObjectPrefix+opts.Name,
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: f.podName})
	if err != nil {
		return nil, fmt.Errorf("lock of Lease %s/%s%s: %w", opts.Namespace, netv1beta1.GatewayObjectPrefix, opts.Name, err)
	}
	pods, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("client for the pods: %w", err)
	}
	return &gateway.Election{
		Lock: lock, Pods: pods, PodName: f.podName,
		LeaseDuration: f.leaseDuration, RenewDeadline: f.leaseRenew, RetryPeriod: f.leaseRetry,
	}, nil
}
