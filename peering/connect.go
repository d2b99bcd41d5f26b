package peering

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/api/gatewayrole"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/manifests"
)

// ConnectOptions say how Connect sets a peering up.
type ConnectOptions struct {
	// Server is the GatewayServer to apply on the remote cluster; its Peer
	// is set by Connect. Its MTU is the client's too.
	Server manifests.GatewayServerOptions
	// ClientAddresses and ClientPort, when set, are where the client
	// connects instead of the server's published endpoint.
	ClientAddresses []string
	ClientPort      int32
	// ClientReplicas is the number of the client's gateway pods; 0 is the
	// API's default, one.
	ClientReplicas int32
	// ShareKeys hands each gateway's PublicKey to the other cluster.
	ShareKeys bool
	// Wait waits until both Connections report Connected.
	Wait bool
}

// Check reports what in o cannot work besides the server's endpoint and
// MTU, which package manifests checks when it builds the server: errors are
// *field.Error naming ServerReplicas, ClientReplicas or ClientPort.
func (o ConnectOptions) Check() error {
	for _, r := range []struct {
		field string
		n     int32
	}{{"ServerReplicas", o.Server.Replicas}, {"ClientReplicas", o.ClientReplicas}} {
		if err := manifests.ValidateReplicas(r.n); r.n != 0 && err != nil {
			return field.New(r.field, "", err)
		}
	}
	if err := manifests.ValidatePort(o.ClientPort); o.ClientPort != 0 && err != nil {
		return field.New("ClientPort", "", err)
	}
	return nil
}

// Connect peers the networks of two clusters, local becoming the gateway
// client and remote the gateway server: Init (each cluster's Configuration
// applied on the other and awaited Ready), then the GatewayServer (awaited
// until it publishes its endpoint and key), the GatewayClient pointing at
// it, and the PublicKeys. Every step is an apply, so an interrupted Connect
// can run again.
func Connect(ctx context.Context, local, remote *Cluster, o ConnectOptions) error {
	if err := Init(ctx, local, remote, true); err != nil {
		return err
	}
	localID, remoteID := local.Info.ClusterID, remote.Info.ClusterID

	// The server, on the remote cluster.
	serverOpts := o.Server
	serverOpts.Peer = manifests.Peer{RemoteClusterID: localID}
	server, err := manifests.GatewayServer(serverOpts)
	if err != nil {
		return err
	}
	if err := remote.applyInTenant(ctx, server); err != nil {
		return err
	}
	remote.Progress.Infof("Gateway server %s applied", manifests.ObjectRef(server.Namespace, server.Name))
	serverKey := client.ObjectKeyFromObject(server)
	if err := WaitServerEndpoint(ctx, remote.Client, remote.Progress, serverKey, server); err != nil {
		return err
	}
	serverPub, err := WaitPublicKey(ctx, remote.Client, remote.Progress, gatewayrole.Server, serverKey)
	if err != nil {
		return err
	}
	remote.Progress.Infof("Gateway server correctly set up: endpoint %s:%d", strings.Join(server.Status.Endpoint.Addresses, ","), server.Status.Endpoint.Port)

	// The client, on the local cluster.
	addresses, port := server.Status.Endpoint.Addresses, server.Status.Endpoint.Port
	if len(o.ClientAddresses) > 0 {
		addresses = o.ClientAddresses
	}
	if o.ClientPort != 0 {
		port = o.ClientPort
	}
	gwc, err := manifests.GatewayClient(manifests.GatewayClientOptions{
		Peer:      manifests.Peer{RemoteClusterID: remoteID},
		Addresses: addresses, Port: port, MTU: o.Server.MTU, Replicas: o.ClientReplicas,
	})
	if err != nil {
		return err
	}
	if err := local.applyInTenant(ctx, gwc); err != nil {
		return err
	}
	local.Progress.Infof("Gateway client %s applied, connecting to %s:%d", manifests.ObjectRef(gwc.Namespace, gwc.Name), strings.Join(addresses, ","), port)
	clientPub, err := WaitPublicKey(ctx, local.Client, local.Progress, gatewayrole.Client, client.ObjectKeyFromObject(gwc))
	if err != nil {
		return err
	}
	local.Progress.Infof("Gateway client correctly set up")

	// Public keys: the server's to the local cluster, the client's to the remote one.
	if !o.ShareKeys {
		local.Progress.Infof("Public keys not shared (--disable-sharing-keys): apply each gateway's PublicKey on the other cluster")
	} else {
		for _, s := range []struct {
			on    *Cluster
			owner string
			keys  GatewayKeys
		}{{local, remoteID, serverPub}, {remote, localID, clientPub}} {
			pk, err := manifests.PublicKeyForPeer(s.owner, "", s.keys.Current, s.keys.Next)
			if err != nil {
				return err
			}
			if err := s.on.applyInTenant(ctx, pk); err != nil {
				return err
			}
			s.on.Progress.Infof("Public key of %s's gateway applied", s.owner)
		}
	}

	if !o.Wait {
		return nil
	}
	for _, s := range []struct {
		on      *Cluster
		gateway client.ObjectKey
	}{{local, client.ObjectKeyFromObject(gwc)}, {remote, serverKey}} {
		key := client.ObjectKey{Namespace: s.gateway.Namespace, Name: manifests.GatewayObjectName(s.gateway.Name)}
		state, err := s.on.Progress.Wait(ctx, "Connection "+key.String()+" to be Connected", func(ctx context.Context) (bool, string, error) {
			var conn netv1beta1.Connection
			if err := s.on.Client.Get(ctx, key, &conn); err != nil {
				if apierrors.IsNotFound(err) {
					return false, "not created yet by the gateway agent", nil
				}
				return false, "", fmt.Errorf("get Connection %s: %w", key, err)
			}
			state := orNone(string(conn.Status.Value))
			if conn.Status.Latency.Value != "" {
				state += ", latency " + conn.Status.Latency.Value
			}
			return conn.Status.Value == netv1beta1.Connected, state, nil
		})
		if err != nil {
			return err
		}
		s.on.Progress.Infof("Connection is established: %s", state)
	}
	return nil
}

// Init declares each cluster's network on the other: it applies each
// cluster's Configuration in its tenant namespace on the other cluster
// and, with wait, waits until both are Ready, their ranges remapped. It is
// the first step of Connect, which a later Connect finds done.
func Init(ctx context.Context, local, remote *Cluster, wait bool) error {
	if err := checkTwo(local, remote); err != nil {
		return err
	}
	for _, s := range []struct{ on, of *Cluster }{{remote, local}, {local, remote}} {
		conf, err := manifests.ConfigurationForPeer(s.of.Info, "")
		if err != nil {
			return err
		}
		if err := s.on.applyInTenant(ctx, conf); err != nil {
			return err
		}
		s.on.Progress.Infof("Configuration of %s applied (pod CIDRs %s)", s.of.Info.ClusterID, strings.Join(prefixStrings(s.of.Info.PodCIDRs), ", "))
	}
	if !wait {
		return nil
	}
	for _, s := range []struct{ on, of *Cluster }{{local, remote}, {remote, local}} {
		conf := &netv1beta1.Configuration{}
		key := client.ObjectKey{Namespace: manifests.TenantNamespace(s.of.Info.ClusterID), Name: s.of.Info.ClusterID}
		_, err := s.on.Progress.Wait(ctx, "the Configuration of "+s.of.Info.ClusterID+" to be Ready", func(ctx context.Context) (bool, string, error) {
			if err := s.on.Client.Get(ctx, key, conf); err != nil {
				return false, "", fmt.Errorf("get Configuration %s: %w", key, err)
			}
			ready, state := ConditionState(conf.Generation, conf.Status.CommonStatus)
			return ready, state, nil
		})
		if err != nil {
			return err
		}
		s.on.Progress.Infof("Network configuration correctly set up: pod CIDRs of %s %s", s.of.Info.ClusterID, remapString(configurationInfo(conf).PodCIDRs))
	}
	return nil
}

// checkTwo refuses a peering of a cluster with itself.
func checkTwo(local, remote *Cluster) error {
	if local.Info.ClusterID == remote.Info.ClusterID {
		return fmt.Errorf("both clusters are %q: the remote one must be another cluster", local.Info.ClusterID)
	}
	return nil
}
