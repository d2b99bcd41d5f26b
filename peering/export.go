package peering

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/manifests"
)

// PeerGateway finds the one gateway of the peering with peer in namespace
// ns, and returns its role and key.
func PeerGateway(ctx context.Context, cl client.Reader, ns, peer string) (gatewayrole.Role, client.ObjectKey, error) {
	sel := client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: peer}
	var servers netv1beta1.GatewayServerList
	var clients netv1beta1.GatewayClientList
	for _, l := range []client.ObjectList{&servers, &clients} {
		if err := cl.List(ctx, l, client.InNamespace(ns), sel); err != nil {
			return "", client.ObjectKey{}, fmt.Errorf("list gateways for %s in %s: %w", peer, ns, err)
		}
	}
	switch {
	case len(servers.Items)+len(clients.Items) > 1:
		return "", client.ObjectKey{}, fmt.Errorf("namespace %s holds %d gateways labelled %s=%s: a peering has one",
			ns, len(servers.Items)+len(clients.Items), netv1beta1.RemoteClusterIDLabel, peer)
	case len(servers.Items) == 1:
		return gatewayrole.Server, client.ObjectKeyFromObject(&servers.Items[0]), nil
	case len(clients.Items) == 1:
		return gatewayrole.Client, client.ObjectKeyFromObject(&clients.Items[0]), nil
	}
	return "", client.ObjectKey{}, fmt.Errorf("no GatewayServer or GatewayClient labelled %s=%s in %s: apply this side's bundle first (bundle init)",
		netv1beta1.RemoteClusterIDLabel, peer, ns)
}

// Export reads what the peer needs from this cluster, whose cluster-info is
// in peerlinkNS, for the peering with peer whose gateway is in namespace ns:
// this cluster's Configuration, the PublicKey of its gateway and, on the
// server side, the GatewayClient the peer should use. It waits until the
// controller has published the key and, for a server, the endpoint.
func Export(ctx context.Context, cl client.Reader, p Progress, peerlinkNS, ns, peer string) ([]runtime.Object, error) {
	info, err := ReadClusterInfo(ctx, cl, peerlinkNS)
	if err != nil {
		return nil, err
	}
	conf, err := manifests.ConfigurationForPeer(info, "")
	if err != nil {
		return nil, err
	}
	role, key, err := PeerGateway(ctx, cl, ns, peer)
	if err != nil {
		return nil, err
	}
	pk, err := PublicKeyForPeer(ctx, cl, p, info.ClusterID, role, key, "")
	if err != nil {
		return nil, err
	}
	p.Infof("Public key of gateway %s read", key)
	objs := []runtime.Object{conf, pk}
	if role == gatewayrole.Client {
		return objs, nil
	}
	server := &netv1beta1.GatewayServer{}
	if err := WaitServerEndpoint(ctx, cl, p, key, server); err != nil {
		return nil, err
	}
	gwc, err := manifests.GatewayClientForPeer(info.ClusterID, "", server)
	if err != nil {
		return nil, err
	}
	p.Infof("Endpoint %s:%d of gateway server %s read", strings.Join(gwc.Spec.Endpoint.Addresses, ","), gwc.Spec.Endpoint.Port, key)
	return append(objs, gwc), nil
}
