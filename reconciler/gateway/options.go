package gateway

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/peerlink/peerlink/mcs"
)

// Options are what the gateway reconcilers know of their own cluster.
type Options struct {
	// ClusterID is this cluster's ID, which no gateway may name as its
	// peer.
	ClusterID string
	// Namespace is the controller's namespace, which holds the default
	// gateway templates.
	Namespace string
	// LocalRanges are this cluster's pod and external CIDRs: a gateway
	// pod lets out of the tunnel only what is addressed to them.
	LocalRanges []netip.Prefix
	// UnknownSource is this cluster's unknown-source address, which a
	// gateway pod gives to what the nodes send themselves.
	UnknownSource netip.Addr
	// ServiceLimits bound what one peer may export to this cluster, which
	// its gateway pod holds the peer to as the services reconciler does.
	ServiceLimits mcs.Limits
	// AllowedTemplateKinds are the kinds gateway templates may render
	// besides WgGatewayServer and WgGatewayClient.
	AllowedTemplateKinds []schema.GroupVersionKind
}

// Setup registers with mgr the reconcilers of the four gateway kinds:
// GatewayServer and GatewayClient, rendered from their templates, and
// WgGatewayServer and WgGatewayClient, which run the gateways.
func Setup(mgr ctrl.Manager, opts Options) error {
	if _, err := setupWgGateway(mgr, opts, wgGatewayServerKind()); err != nil {
		return fmt.Errorf("set up wggatewayserver reconciler: %w", err)
	}
	if _, err := setupWgGateway(mgr, opts, wgGatewayClientKind()); err != nil {
		return fmt.Errorf("set up wggatewayclient reconciler: %w", err)
	}
	if err := setupIPReaders(mgr); err != nil {
		return fmt.Errorf("set up gateway ip readers: %w", err)
	}
	if _, err := setupGateway(mgr, opts, gatewayServerKind()); err != nil {
		return fmt.Errorf("set up gatewayserver reconciler: %w", err)
	}
	if _, err := setupGateway(mgr, opts, gatewayClientKind()); err != nil {
		return fmt.Errorf("set up gatewayclient reconciler: %w", err)
	}
	return nil
}
