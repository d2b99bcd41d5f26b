package manifests

import (
	"fmt"
	"net/netip"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
)

// ConfigurationForPeer builds the Configuration a cluster hands to its peer:
// the local cluster's real CIDRs in spec.remote, named and labelled with the
// local cluster ID, because the peer applies it. An empty namespace is
// liqo-tenant-<local cluster ID>, the peer's tenant namespace for us.
func ConfigurationForPeer(local clusterinfo.Info, namespace string) (*netv1beta1.Configuration, error) {
	o := ConfigurationOptions{
		Peer:     Peer{Namespace: namespace, RemoteClusterID: local.ClusterID},
		PodCIDRs: local.PodCIDRs,
	}
	if local.ExternalCIDR.IsValid() {
		o.ExternalCIDRs = []netip.Prefix{local.ExternalCIDR}
	}
	return Configuration(o)
}

// PublicKeyForPeer builds the PublicKey a cluster hands to its peer from
// the public keys one of its gateways publishes in its status: the current
// one and, while a key rotation is under way, the next one. The object is
// named and labelled with the local cluster ID.
func PublicKeyForPeer(localClusterID, namespace string, key, next []byte) (*netv1beta1.PublicKey, error) {
	return PublicKey(PublicKeyOptions{
		Peer:    Peer{Namespace: namespace, RemoteClusterID: localClusterID},
		Key:     key,
		NextKey: next,
	})
}

// GatewayClientForPeer builds the GatewayClient a server cluster hands to
// its peer: it points at the server's published endpoint, its port also in
// list form when the server publishes the list (templates of the peer may
// read either), uses the server's MTU, and is named and labelled with the
// server's cluster ID.
func GatewayClientForPeer(localClusterID, namespace string, server *netv1beta1.GatewayServer) (*netv1beta1.GatewayClient, error) {
	ep := server.Status.Endpoint
	if ep == nil || len(ep.Addresses) == 0 || ep.Port == 0 {
		return nil, fmt.Errorf("gatewayserver %s/%s: status.endpoint is not published yet", server.Namespace, server.Name)
	}
	o := GatewayClientOptions{
		Peer:      Peer{Namespace: namespace, RemoteClusterID: localClusterID},
		Addresses: ep.Addresses,
		Port:      ep.Port,
		Ports:     ep.Ports,
		MTU:       netv1beta1.EffectiveMTU(server.Spec.MTU),
	}
	if ep.Protocol != nil {
		o.Protocol = *ep.Protocol
	}
	return GatewayClient(o)
}
