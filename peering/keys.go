package peering

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/manifests"
)

// ErrKeyPending says a gateway has not published its public key yet: the
// controller does once it has made or checked the gateway's key Secret.
var ErrKeyPending = errors.New("not published yet by the controller")

// GatewayKeys are the public keys a gateway publishes in its status: the
// current one, and the next one while a key rotation is under way.
type GatewayKeys struct {
	Current, Next []byte
}

// GatewayPublicKey reads the public keys a gateway publishes in its status.
// No Secret is read.
func GatewayPublicKey(ctx context.Context, c client.Reader, role gatewayrole.Role, key client.ObjectKey) (GatewayKeys, error) {
	gw, err := getGateway(ctx, c, role, key)
	if err != nil {
		return GatewayKeys{}, err
	}
	return publishedKeys(gw, key)
}

// getGateway reads the gateway of role named key.
func getGateway(ctx context.Context, c client.Reader, role gatewayrole.Role, key client.ObjectKey) (client.Object, error) {
	var gw client.Object = &netv1beta1.GatewayClient{}
	kind := manifests.KindGatewayClient
	if role == gatewayrole.Server {
		gw, kind = &netv1beta1.GatewayServer{}, manifests.KindGatewayServer
	}
	if err := c.Get(ctx, key, gw); err != nil {
		return nil, fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	return gw, nil
}

// FindGateway finds the gateway of role named name when no namespace is
// given: the one of that name in any namespace, as a user who created it
// with `kubectl apply` of a manifest (in its own or the current namespace)
// expects. With none found, or without the right to list gateways in every
// namespace, it is the name's tenant namespace, where peerlink puts
// gateways named after their peer. Several of that name are an error
// naming their namespaces.
func FindGateway(ctx context.Context, c client.Reader, role gatewayrole.Role, name string) (client.ObjectKey, error) {
	fallback := client.ObjectKey{Namespace: manifests.TenantNamespace(name), Name: name}
	var list client.ObjectList = &netv1beta1.GatewayClientList{}
	if role == gatewayrole.Server {
		list = &netv1beta1.GatewayServerList{}
	}
	if err := c.List(ctx, list, client.MatchingFields{"metadata.name": name}); err != nil {
		if apierrors.IsForbidden(err) {
			return fallback, nil
		}
		return client.ObjectKey{}, fmt.Errorf("find gateway %s %s: %w", role, name, err)
	}
	var namespaces []string
	switch l := list.(type) {
	case *netv1beta1.GatewayServerList:
		for _, gw := range l.Items {
			namespaces = append(namespaces, gw.Namespace)
		}
	case *netv1beta1.GatewayClientList:
		for _, gw := range l.Items {
			namespaces = append(namespaces, gw.Namespace)
		}
	}
	switch len(namespaces) {
	case 0:
		return fallback, nil
	case 1:
		return client.ObjectKey{Namespace: namespaces[0], Name: name}, nil
	}
	return client.ObjectKey{}, fmt.Errorf("gateway %s %s is in several namespaces (%s): say which", role, name, strings.Join(namespaces, ", "))
}

// publishedKeys are the public keys gw, named key, publishes in its status.
func publishedKeys(gw client.Object, key client.ObjectKey) (GatewayKeys, error) {
	var keys GatewayKeys
	var rotation *netv1beta1.KeyRotationStatus
	kind := manifests.KindGatewayClient
	switch gw := gw.(type) {
	case *netv1beta1.GatewayServer:
		keys.Current, rotation, kind = gw.Status.PublicKey, gw.Status.KeyRotation, manifests.KindGatewayServer
	case *netv1beta1.GatewayClient:
		keys.Current, rotation = gw.Status.PublicKey, gw.Status.KeyRotation
	}
	if len(keys.Current) == 0 {
		return GatewayKeys{}, fmt.Errorf("status.publicKey of %s %s: %w", kind, key, ErrKeyPending)
	}
	if rotation != nil {
		keys.Next = rotation.NextPublicKey
	}
	return keys, nil
}

// WaitPublicKey waits until the controller has published a gateway's public
// key, and returns its keys.
func WaitPublicKey(ctx context.Context, c client.Reader, p Progress, role gatewayrole.Role, gateway client.ObjectKey) (GatewayKeys, error) {
	var keys GatewayKeys
	_, err := p.Wait(ctx, "the public key of gateway "+gateway.String(), func(ctx context.Context) (bool, string, error) {
		k, err := GatewayPublicKey(ctx, c, role, gateway)
		if errors.Is(err, ErrKeyPending) {
			return false, "key pair not made yet by the controller", nil
		}
		if err != nil {
			return false, "", err
		}
		keys = k
		return true, "", nil
	})
	return keys, err
}

// PublicKeyForPeer waits until a gateway of this cluster, clusterID, has
// published its public key, and returns the PublicKey the peer applies:
// named and labelled with clusterID, in namespace (empty: the peer's tenant
// namespace for this cluster), with the next key of a rotation under way.
func PublicKeyForPeer(ctx context.Context, c client.Reader, p Progress, clusterID string, role gatewayrole.Role, gateway client.ObjectKey, namespace string) (*netv1beta1.PublicKey, error) {
	keys, err := WaitPublicKey(ctx, c, p, role, gateway)
	if err != nil {
		return nil, err
	}
	return manifests.PublicKeyForPeer(clusterID, namespace, keys.Current, keys.Next)
}

// WaitServerEndpoint waits until a GatewayServer publishes its endpoint for
// its current spec (a changed spec may move it), and reads it into server.
func WaitServerEndpoint(ctx context.Context, c client.Reader, p Progress, key client.ObjectKey, server *netv1beta1.GatewayServer) error {
	_, err := p.Wait(ctx, "the endpoint of gateway server "+key.String(), func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, key, server); err != nil {
			if apierrors.IsNotFound(err) {
				return false, "", fmt.Errorf("gatewayserver %s is gone", key)
			}
			return false, "", fmt.Errorf("get GatewayServer %s: %w", key, err)
		}
		ep := server.Status.Endpoint
		if server.Status.ObservedGeneration < server.Generation || ep == nil || len(ep.Addresses) == 0 || ep.Port == 0 {
			_, state := ConditionState(server.Generation, server.Status.CommonStatus)
			return false, state, nil
		}
		return true, fmt.Sprintf("%s:%d", strings.Join(ep.Addresses, ","), ep.Port), nil
	})
	return err
}
