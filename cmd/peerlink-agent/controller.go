package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/internal/version"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/reconciler"
	"github.com/peerlink/peerlink/templates"
)

// leaderElectionID names the Lease the controller replicas compete for.
const leaderElectionID = "peerlink-controller"

// controllerOptions are the flags of `peerlink-agent controller`.
type controllerOptions struct {
	processFlags
	leaderElect  bool
	kubeAPIQPS   float32
	kubeAPIBurst int

	clusterID    string
	podCIDRs     []string
	serviceCIDR  string
	externalCIDR string
	internalCIDR string
	reserved     []string
	pools        []string
	allowedPeer  []string
	routedPeer   []string
	allowedKinds []string
	namespace    string

	gatewayImage     string
	importNamespaces []string
	maxServices      int
	maxEndpoints     int
	maxAllEndpoints  int
	maxImportedBytes int
}

func newControllerCommand() *cobra.Command {
	var o controllerOptions
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the reconcilers of the networking.liqo.io API",
		Long: `Run the peerlink controller: it remaps the CIDRs of each peer's Configuration
into free local ranges, runs the gateways of WgGatewayServer and WgGatewayClient
objects, and publishes this cluster's ID and ranges in the cluster-info
ConfigMap of its namespace, with where each comes from.

The cluster ID, the pod CIDRs and the service CIDR are detected from the
cluster when not given; given values always win. The controller logs what it
detected and from where.

Repeatable CIDR flags also take comma-separated lists.`,
	}
	return subcommand(cmd, o.addFlags, o.facts, func(facts reconciler.ClusterFacts) error { return runController(o, facts) })
}

// addFlags defines the flags of the command in f.
func (o *controllerOptions) addFlags(f *pflag.FlagSet) {
	o.processFlags.addFlags(f, ":8081", ":8080", "")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader through a Lease in --namespace, so that replicas can stand by")
	// Importing a large export set writes a few objects per service.
	f.Float32Var(&o.kubeAPIQPS, "kube-api-qps", 200, "steady rate of requests to the API server per second")
	f.IntVar(&o.kubeAPIBurst, "kube-api-burst", 400, "burst of requests to the API server")

	f.StringVar(&o.clusterID, "cluster-id", "", "ID of this cluster, as its peers know it (default: the first 8 hex digits of the kube-system namespace's UID)")
	f.StringSliceVar(&o.podCIDRs, "pod-cidr", nil, "pod CIDR of this cluster (repeatable; default: the /16 holding the Nodes' spec.podCIDRs, or the smallest prefix holding them if larger)")
	f.StringVar(&o.serviceCIDR, "service-cidr", "", "service CIDR of this cluster (default: read from the ServiceCIDR API, or from the API server's refusal of a dry-run ClusterIP outside it)")
	f.StringVar(&o.externalCIDR, "external-cidr", "10.70.0.0/16", "CIDR under which peers see this cluster's non-pod endpoints")
	f.StringVar(&o.internalCIDR, "internal-cidr", "10.80.0.0/16", "CIDR set aside for the overlay between nodes and gateways, never given to a peer")
	f.StringSliceVar(&o.reserved, "reserved-cidr", nil, "further CIDR in use in this cluster, never given to a peer (repeatable)")
	f.StringSliceVar(&o.pools, "ipam-pool", nil, "CIDR peers' ranges are remapped into, searched in order, each range into a pool of its family (repeatable; IPv4 or IPv6; a family with no pool given takes the defaults 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16 for IPv4, fd00::/8 for IPv6)")
	f.StringSliceVar(&o.allowedKinds, "allowed-template-kind", nil, "kind gateway templates may render besides WgGatewayServer and WgGatewayClient, as group/version/Kind (repeatable; never a built-in Kubernetes kind)")
	f.StringSliceVar(&o.allowedPeer, "allowed-peer-cidr", nil, "CIDR a peer's ranges must lie in to be routed (repeatable; IPv4 or IPv6; default 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7)")
	f.StringSliceVar(&o.routedPeer, "routed-peer-cidr", nil, "CIDR of the address plan declared for peers: a peer's range inside it is routed as it is when it collides with nothing here; every other is remapped into the pools (repeatable; default none: every peer range is remapped)")
	f.StringVar(&o.namespace, "namespace", "peerlink", "namespace of the controller: its Lease and the cluster-info ConfigMap")
	f.StringVar(&o.gatewayImage, "gateway-image", "", "image the default gateway templates run (default: the controller pod's own image, found through POD_NAME, else "+templates.DefaultImage+")")
	f.StringSliceVar(&o.importNamespaces, "import-namespace", nil, "namespace that takes the services peers export, besides those labelled "+mcs.ImportNamespaceLabel+"=true (repeatable; * for every namespace; default none)")
	f.IntVar(&o.maxServices, "max-imported-services", mcs.DefaultLimits.Services, "most services one peer may export to this cluster; more is refused")
	f.IntVar(&o.maxEndpoints, "max-endpoints-per-service", mcs.DefaultLimits.Endpoints, "most endpoints a service a peer exports may have; more is refused")
	f.IntVar(&o.maxAllEndpoints, "max-imported-endpoints", mcs.DefaultLimits.TotalEndpoints, "most endpoints of all the services one peer exports to this cluster; a service that would take more is refused")
	f.IntVar(&o.maxImportedBytes, "max-imported-bytes", mcs.DefaultLimits.DocumentBytes, "most bytes of JSON the services one peer exports to this cluster may take; a service that would take more is refused")
}

// facts parses and validates the flags of the local facts. Errors name the
// flags.
func (o *controllerOptions) facts() (reconciler.ClusterFacts, error) {
	var errs []error
	one := func(flag, s string) netip.Prefix {
		if s == "" {
			return netip.Prefix{}
		}
		p, err := cidr.ParseNetwork(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", flag, err))
		}
		return p
	}
	many := func(flag string, ss []string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			// An empty value is an empty list, so that a manifest can
			// pass --reserved-cidr=$(RESERVED_CIDRS) with nothing in it.
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, one(flag, s))
			}
		}
		return out
	}
	f := reconciler.ClusterFacts{
		Info: clusterinfo.Info{
			ClusterID:    o.clusterID,
			PodCIDRs:     many("pod-cidr", o.podCIDRs),
			ServiceCIDR:  one("service-cidr", o.serviceCIDR),
			ExternalCIDR: one("external-cidr", o.externalCIDR),
			InternalCIDR: one("internal-cidr", o.internalCIDR),
			AllowedPeer:  many("allowed-peer-cidr", o.allowedPeer),
			RoutedPeer:   many("routed-peer-cidr", o.routedPeer),
			// Published, so that the CLI can tell a version skew.
			ControllerVersion: version.Get().Version,
		},
		ReservedCIDRs: many("reserved-cidr", o.reserved),
		Pools:         many("ipam-pool", o.pools),
		Namespace:     o.namespace,
		ServiceLimits: mcs.Limits{Services: o.maxServices, Endpoints: o.maxEndpoints, TotalEndpoints: o.maxAllEndpoints, DocumentBytes: o.maxImportedBytes},
	}
	for _, ns := range o.importNamespaces {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); ns != "*" && len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--import-namespace %q: %s", ns, strings.Join(msgs, "; ")))
		}
		f.ImportNamespaces = append(f.ImportNamespaces, ns)
	}
	if o.maxServices < 1 || o.maxEndpoints < 1 || o.maxAllEndpoints < 1 || o.maxImportedBytes < 1 {
		errs = append(errs, errors.New("--max-imported-services, --max-endpoints-per-service, --max-imported-endpoints and --max-imported-bytes must be at least 1"))
	}
	for _, s := range o.allowedKinds {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		k, err := templates.ParseKind(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--allowed-template-kind: %w", err))
		}
		f.AllowedTemplateKinds = append(f.AllowedTemplateKinds, k)
	}
	if len(errs) > 0 {
		return reconciler.ClusterFacts{}, errors.Join(errs...)
	}
	if err := f.ValidateGiven(); err != nil {
		return reconciler.ClusterFacts{}, field.WithFlags(err, factFlags)
	}
	return f, nil
}

// factFlags are the flags of the fields of reconciler.ClusterFacts.
var factFlags = map[string]string{
	"ClusterID": "--cluster-id", "Namespace": "--namespace", "PodCIDRs": "--pod-cidr", "ServiceCIDR": "--service-cidr",
	"ExternalCIDR": "--external-cidr", "InternalCIDR": "--internal-cidr", "ReservedCIDRs": "--reserved-cidr",
	"Pools": "--ipam-pool", "AllowedTemplateKinds": "--allowed-template-kind", "AllowedPeer": "--allowed-peer-cidr",
	"RoutedPeer": "--routed-peer-cidr",
}

// detectTimeout bounds the detection of the facts not given at start.
const detectTimeout = time.Minute

// runController builds the manager, registers the reconcilers and runs until
// SIGTERM or SIGINT.
func runController(o controllerOptions, facts reconciler.ClusterFacts) error {
	mgr, log, err := o.newManager(func(cfg *rest.Config, opts *ctrl.Options) {
		cfg.QPS, cfg.Burst = o.kubeAPIQPS, o.kubeAPIBurst
		opts.LeaderElection = o.leaderElect
		opts.LeaderElectionID = leaderElectionID
		opts.LeaderElectionNamespace = facts.Namespace
		// The process exits right after the manager stops, so giving up the
		// Lease then lets a standby take over at once.
		opts.LeaderElectionReleaseOnCancel = true
		opts.Cache.ByObject = reconciler.CacheByObject()
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), detectTimeout)
	defer cancel()
	if err := facts.Detect(ctx, mgr.GetClient(), mgr.GetAPIReader()); err != nil {
		return field.WithFlags(err, factFlags)
	}
	if err := facts.Validate(); err != nil {
		return field.WithFlags(err, factFlags)
	}
	facts.GatewayImage = o.gatewayImage
	if facts.GatewayImage == "" {
		facts.GatewayImage = ownImage(ctx, mgr.GetAPIReader(), facts.Namespace, log)
	}
	for _, f := range []struct{ key, value string }{
		{clusterinfo.KeyClusterID, facts.ClusterID},
		{clusterinfo.KeyPodCIDRs, fmt.Sprint(facts.PodCIDRs)},
		{clusterinfo.KeyServiceCIDR, facts.ServiceCIDR.String()},
	} {
		log.Info("cluster fact", "fact", f.key, "value", f.value, "source", facts.Sources[f.key])
	}
	if err := reconciler.SetupAll(mgr, facts); err != nil {
		return err
	}
	log.Info("starting controller", "version", version.Get().String(), "clusterID", facts.ClusterID, "namespace", facts.Namespace)
	return serve(mgr, "ping", healthz.Ping)
}

// ownImage is the image of the controller's own container, read from its
// pod (POD_NAME in namespace), so that gateways run the image the
// installation chose; empty when it cannot be read, and the templates keep
// theirs.
func ownImage(ctx context.Context, r client.Reader, namespace string, log logr.Logger) string {
	name := os.Getenv("POD_NAME")
	if name == "" {
		return ""
	}
	var pod corev1.Pod
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pod); err != nil {
		log.Error(err, "read the controller's own pod for its image; gateways run the templates' image")
		return ""
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "controller" {
			log.Info("gateways run the controller's image", "image", c.Image)
			return c.Image
		}
	}
	return ""
}
