package peering

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/manifests"
)

// APIServerIPName is the name of the IP object, in peerlink's namespace,
// that remaps the API server into the external CIDR.
const APIServerIPName = "peerlink-api-server"

// APIServerName is the name the peer checks the API server's certificate
// against: a name every API server's certificate holds, where the remapped
// address is in none.
const APIServerName = "kubernetes.default.svc"

// PeerAccessName names what a peer's identity is made of: its
// ServiceAccount, Role and RoleBinding in its tenant namespace.
const PeerAccessName = "peerlink-peer"

// peerAccessRules are all a peer may do with its kubeconfig, in its tenant
// namespace: read the objects of the peering, and hand over its gateway's
// public key, so no file needs to travel. Nothing else: no Secret, no
// built-in kind, nothing in another namespace, nothing cluster-scoped.
var peerAccessRules = []rbacv1.PolicyRule{{
	APIGroups: []string{netv1beta1.GroupVersion.Group},
	Resources: []string{"configurations", "gatewayservers", "gatewayclients", "connections", "publickeies"},
	Verbs:     []string{"get", "list", "watch"},
}, {
	APIGroups: []string{netv1beta1.GroupVersion.Group},
	Resources: []string{"publickeies"},
	Verbs:     []string{"create", "update", "patch"},
}}

// APIServer is where a cluster's API server is, and where its IP object
// remapped it.
type APIServer struct {
	// Local is the API server's address and port, as the endpoints of the
	// Service default/kubernetes give them.
	Local netip.AddrPort
	// Remapped is the address of the external CIDR the IP object holds.
	Remapped netip.Addr
}

// ExposeAPIServer applies the IP object that remaps the cluster's API
// server (its first IPv4 endpoint of the Service default/kubernetes: one
// API server of several) into the external CIDR of the cluster, in
// namespace, and waits until the controller gives it an address; an IP the
// controller stalls (an API server on a loopback address) is an error at
// once. The IP masquerades: the API server answers the gateway's node,
// whatever its routes.
func ExposeAPIServer(ctx context.Context, s *Cluster, namespace string) (APIServer, error) {
	local, err := apiServerEndpoint(ctx, s.Client)
	if err != nil {
		return APIServer{}, fmt.Errorf("%s cluster: %w", s.Name, err)
	}
	masquerade := true
	ip := &ipamv1alpha1.IP{
		TypeMeta:   metav1.TypeMeta{APIVersion: ipamv1alpha1.GroupVersion.String(), Kind: "IP"},
		ObjectMeta: metav1.ObjectMeta{Name: APIServerIPName, Namespace: namespace},
		Spec:       ipamv1alpha1.IPSpec{IP: netv1beta1.IP(local.Addr().String()), Masquerade: &masquerade},
	}
	if err := Apply(ctx, s.Client, ip); err != nil {
		return APIServer{}, fmt.Errorf("%s cluster: %w", s.Name, err)
	}
	ref := "IP " + manifests.ObjectRef(namespace, APIServerIPName)
	s.Progress.Infof("%s applied for the API server at %s", ref, local)
	var remapped netip.Addr
	if _, err := s.Progress.Wait(ctx, ref+" to get an address", func(ctx context.Context) (bool, string, error) {
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(ip), ip); err != nil {
			return false, "", fmt.Errorf("get %s: %w", ref, err)
		}
		ready, state := ConditionState(ip.Generation, ip.Status.CommonStatus)
		if stalled := meta.FindStatusCondition(ip.Status.Conditions, netv1beta1.ConditionStalled); stalled != nil && stalled.Status == metav1.ConditionTrue && ip.Status.ObservedGeneration >= ip.Generation {
			return false, "", fmt.Errorf("%s is stalled: %s: %s", ref, stalled.Reason, stalled.Message)
		}
		if !ready {
			return false, state, nil
		}
		remapped, err = netip.ParseAddr(string(ip.Status.IP))
		if err != nil {
			return false, "", fmt.Errorf("status.ip of %s: %w", ref, err)
		}
		return true, state, nil
	}); err != nil {
		return APIServer{}, err
	}
	s.Progress.Infof("API server %s remapped to %s", local, remapped)
	return APIServer{Local: local, Remapped: remapped}, nil
}

// apiServerEndpoint reads the first IPv4 address and the port of the
// EndpointSlices of the Service default/kubernetes.
func apiServerEndpoint(ctx context.Context, c client.Reader) (netip.AddrPort, error) {
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices, client.InNamespace(metav1.NamespaceDefault), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return netip.AddrPort{}, fmt.Errorf("list the EndpointSlices of Service default/kubernetes: %w", err)
	}
	for _, es := range slices.Items {
		if es.AddressType != discoveryv1.AddressTypeIPv4 || len(es.Ports) == 0 || es.Ports[0].Port == nil {
			continue
		}
		for _, ep := range es.Endpoints {
			for _, a := range ep.Addresses {
				if addr, err := netip.ParseAddr(a); err == nil && addr.Is4() {
					return netip.AddrPortFrom(addr, uint16(*es.Ports[0].Port)), nil
				}
			}
		}
	}
	return netip.AddrPort{}, fmt.Errorf("the EndpointSlices of Service default/kubernetes name no IPv4 address with a port")
}

// PeerAddress is where peer reaches the API server a: the remapped
// address under peer's view of a's external CIDR (peer's Configuration of
// a), on the API server's port.
func PeerAddress(ctx context.Context, peer *Cluster, aID string, a APIServer) (netip.AddrPort, error) {
	var conf netv1beta1.Configuration
	key := client.ObjectKey{Namespace: manifests.TenantNamespace(aID), Name: aID}
	if err := peer.Client.Get(ctx, key, &conf); err != nil {
		return netip.AddrPort{}, fmt.Errorf("%s cluster: get Configuration %s: %w", peer.Name, key, err)
	}
	addr, err := conf.RemappedAddr(a.Remapped)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%s cluster: %w", peer.Name, err)
	}
	return netip.AddrPortFrom(addr, a.Local.Port()), nil
}

// PeerKubeconfigOptions say for whom PeerKubeconfig writes a kubeconfig.
type PeerKubeconfigOptions struct {
	// Peer is the peer's cluster ID.
	Peer string
	// Server is this cluster's API server as the peer reaches it.
	Server netip.AddrPort
	// Duration is how long the token is asked to be valid; the API server
	// may shorten it.
	Duration time.Duration
}

// minTokenDuration is the shortest token the API server issues.
const minTokenDuration = 10 * time.Minute

// Check reports what in o cannot work: errors are *field.Error naming
// Peer, Server or Duration.
func (o PeerKubeconfigOptions) Check() error {
	if err := manifests.ValidateObjectName(o.Peer); err != nil {
		return field.New("Peer", o.Peer, err)
	}
	if !o.Server.IsValid() || o.Server.Port() == 0 {
		return field.Invalid("Server", o.Server, "an address and a port")
	}
	return CheckTokenDuration(o.Duration)
}

// CheckTokenDuration reports a token duration the API server would refuse:
// a *field.Error naming Duration.
func CheckTokenDuration(d time.Duration) error {
	if d < minTokenDuration {
		return field.Invalid("Duration", d, "at least %s", minTokenDuration)
	}
	return nil
}

// PeerKubeconfig gives the peer its identity on the cluster, in its tenant
// namespace: a ServiceAccount bound by a Role to peerAccessRules, all
// labelled for the peer, so Disconnect and Reset remove them, and deleting
// the ServiceAccount revokes every token it was given. It returns a
// kubeconfig with a token of that ServiceAccount, valid for o.Duration (or
// less, when the API server caps tokens), whose server is o.Server, checked
// as APIServerName against the cluster's root CA; and the token's expiry.
func PeerKubeconfig(ctx context.Context, s *Cluster, o PeerKubeconfigOptions) ([]byte, time.Time, error) {
	if err := o.Check(); err != nil {
		return nil, time.Time{}, err
	}
	ns := manifests.TenantNamespace(o.Peer)
	meta := metav1.ObjectMeta{Name: PeerAccessName, Namespace: ns, Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: o.Peer}}
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta}
	role := &rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"}, ObjectMeta: meta, Rules: peerAccessRules}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: PeerAccessName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: PeerAccessName, Namespace: ns}},
	}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := s.applyInTenant(ctx, obj); err != nil {
			return nil, time.Time{}, err
		}
	}
	s.Progress.Infof("ServiceAccount, Role and RoleBinding %s applied for %s", manifests.ObjectRef(ns, PeerAccessName), o.Peer)

	var rootCA corev1.ConfigMap
	caKey := client.ObjectKey{Namespace: ns, Name: "kube-root-ca.crt"}
	if _, err := s.Progress.Wait(ctx, "ConfigMap "+caKey.String(), func(ctx context.Context) (bool, string, error) {
		if err := s.Client.Get(ctx, caKey, &rootCA); err != nil {
			return false, err.Error(), client.IgnoreNotFound(err)
		}
		return rootCA.Data["ca.crt"] != "", "no ca.crt yet", nil
	}); err != nil {
		return nil, time.Time{}, err
	}

	seconds := int64(o.Duration / time.Second)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	if err := s.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, time.Time{}, fmt.Errorf("%s cluster: request a token of ServiceAccount %s: %w", s.Name, manifests.ObjectRef(ns, PeerAccessName), err)
	}
	expiry := tr.Status.ExpirationTimestamp.Time

	name := s.Info.ClusterID
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   "https://" + o.Server.String(),
		TLSServerName:            APIServerName,
		CertificateAuthorityData: []byte(rootCA.Data["ca.crt"]),
	}
	user := o.Peer + "@" + name
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: ns}
	cfg.CurrentContext = name
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("write the kubeconfig: %w", err)
	}
	s.Progress.Infof("Kubeconfig for %s written: server %s (as %s), namespace %s, token valid until %s", o.Peer, o.Server, APIServerName, ns, expiry.UTC().Format(time.RFC3339))
	return out, expiry, nil
}

// InBand makes each cluster's API server reachable by the other only
// through the tunnel: it exposes both (ExposeAPIServer, in namespace) and
// returns, keyed by the ID of the cluster it reaches, each cluster's
// kubeconfig for the other (PeerKubeconfig), whose server is the address
// the other sees. The tunnel should be Connected for the kubeconfigs to
// work, not for them to be written.
func InBand(ctx context.Context, local, remote *Cluster, namespace string, d time.Duration) (map[string][]byte, error) {
	if err := checkTwo(local, remote); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, s := range []struct{ on, peer *Cluster }{{local, remote}, {remote, local}} {
		exposed, err := ExposeAPIServer(ctx, s.on, namespace)
		if err != nil {
			return nil, err
		}
		server, err := PeerAddress(ctx, s.peer, s.on.Info.ClusterID, exposed)
		if err != nil {
			return nil, err
		}
		kc, _, err := PeerKubeconfig(ctx, s.on, PeerKubeconfigOptions{Peer: s.peer.Info.ClusterID, Server: server, Duration: d})
		if err != nil {
			return nil, err
		}
		out[s.on.Info.ClusterID] = kc
	}
	return out, nil
}
