package peering

import (
	"bytes"
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/manifests"
)

// RotateKey asks the gateway of local's peering with peer (in namespace ns)
// for a new key pair, by setting its spec.keyRotation to value, and waits
// until the controller has made the next pair. It returns the PublicKey the
// peer applies to accept the next key alongside the current one.
//
// With the peer's cluster at hand (remote not nil) it carries the rotation
// to its end: the PublicKey goes to the peer, the tunnel moves to the new
// pair once the peer's gateway accepts it, and when the controller has
// made the new pair the only one, the peer gets the PublicKey holding the
// new key alone. It then returns that last PublicKey.
func RotateKey(ctx context.Context, local, remote *Cluster, ns, peer, value string) (*netv1beta1.PublicKey, error) {
	role, key, err := PeerGateway(ctx, local.Client, ns, peer)
	if err != nil {
		return nil, err
	}
	var gw client.Object = &netv1beta1.GatewayClient{}
	if role == gatewayrole.Server {
		gw = &netv1beta1.GatewayServer{}
	}
	gw.SetNamespace(key.Namespace)
	gw.SetName(key.Name)
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"keyRotation":%q}}`, value))
	if err := local.Client.Patch(ctx, gw, patch); err != nil {
		return nil, fmt.Errorf("%s cluster: set spec.keyRotation of %s: %w", local.Name, key, err)
	}
	local.Progress.Infof("Key rotation %q asked of gateway %s", value, key)
	var keys GatewayKeys
	_, err = local.Progress.Wait(ctx, "the next key pair of gateway "+key.String(), func(ctx context.Context) (bool, string, error) {
		_, k, err := rotationStatus(ctx, local.Client, role, key)
		if err != nil {
			return false, "", err
		}
		keys = k
		return len(k.Next) > 0, "the controller has not made it yet", nil
	})
	if err != nil {
		return nil, err
	}
	pk, err := manifests.PublicKeyForPeer(local.Info.ClusterID, "", keys.Current, keys.Next)
	if err != nil || remote == nil {
		return pk, err
	}
	next := keys.Next
	if err := remote.applyInTenant(ctx, pk); err != nil {
		return nil, err
	}
	remote.Progress.Infof("Public keys of %s's gateway applied: the current one and the next one", local.Info.ClusterID)
	_, err = local.Progress.Wait(ctx, "the tunnel on the new key pair, the old one forgotten", func(ctx context.Context) (bool, string, error) {
		r, k, err := rotationStatus(ctx, local.Client, role, key)
		if err != nil {
			return false, "", err
		}
		keys = k
		switch {
		case r.status == nil || r.status.Requested != value:
			return false, r.describe(), nil
		case len(k.Next) > 0:
			return false, "", fmt.Errorf("gateway %s: another rotation started meanwhile", key)
		case !bytes.Equal(k.Current, next):
			return false, "the gateway does not publish the new public key yet", nil
		}
		return true, "", nil
	})
	if err != nil {
		return nil, err
	}
	// The new key alone: the one the rotation was for, as the gateway
	// publishes it now.
	pk, err = manifests.PublicKeyForPeer(local.Info.ClusterID, "", next, nil)
	if err != nil {
		return nil, err
	}
	if err := remote.applyInTenant(ctx, pk); err != nil {
		return nil, err
	}
	remote.Progress.Infof("Public key of %s's gateway applied: the new one alone", local.Info.ClusterID)
	return pk, nil
}

// rotation is what a gateway's status says of its key rotation.
type rotation struct {
	status *netv1beta1.KeyRotationStatus
	// condition is the gateway's KeyRotation condition; nil when absent.
	condition *metav1.Condition
}

// describe says in words where a rotation under way stands.
func (r rotation) describe() string {
	if r.condition == nil || r.condition.Reason == netv1beta1.ReasonRotated {
		return "the tunnel still runs on the old key pair"
	}
	return fmt.Sprintf("%s (%s)", r.condition.Message, r.condition.Reason)
}

// rotationStatus reads the key rotation status and the keys of a gateway,
// all from one read of it: two reads could each see another step.
func rotationStatus(ctx context.Context, c client.Reader, role gatewayrole.Role, key client.ObjectKey) (rotation, GatewayKeys, error) {
	gw, err := getGateway(ctx, c, role, key)
	if err != nil {
		return rotation{}, GatewayKeys{}, err
	}
	keys, err := publishedKeys(gw, key)
	if err != nil {
		return rotation{}, keys, err
	}
	var r rotation
	var conds []metav1.Condition
	switch gw := gw.(type) {
	case *netv1beta1.GatewayServer:
		r.status, conds = gw.Status.KeyRotation, gw.Status.Conditions
	case *netv1beta1.GatewayClient:
		r.status, conds = gw.Status.KeyRotation, gw.Status.Conditions
	}
	r.condition = meta.FindStatusCondition(conds, netv1beta1.ConditionKeyRotation)
	return r, keys, nil
}
