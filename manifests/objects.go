package manifests

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/templates"
)

// Kinds of the objects this package builds.
const (
	KindConfiguration = "Configuration"
	KindGatewayServer = "GatewayServer"
	KindGatewayClient = "GatewayClient"
	KindPublicKey     = "PublicKey"
)

// Peer names the peer an object is for and where it goes.
type Peer struct {
	// Name of the object; empty: RemoteClusterID, as the reference CLI does.
	Name string
	// Namespace of the object; empty: liqo-tenant-<RemoteClusterID>.
	Namespace string
	// RemoteClusterID is the peer cluster the object belongs to; it becomes
	// the liqo.io/remote-cluster-id label.
	RemoteClusterID string
}

func (p Peer) objectMeta(extraLabels map[string]string) metav1.ObjectMeta {
	name, ns := p.Name, p.Namespace
	if name == "" {
		name = p.RemoteClusterID
	}
	if ns == "" {
		ns = TenantNamespace(p.RemoteClusterID)
	}
	labels := map[string]string{netv1beta1.RemoteClusterIDLabel: p.RemoteClusterID}
	for k, v := range extraLabels {
		labels[k] = v
	}
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: netv1beta1.GroupVersion.String(), Kind: kind}
}

// ConfigurationOptions are the inputs of Configuration.
type ConfigurationOptions struct {
	Peer
	// PodCIDRs are the peer's real pod CIDRs.
	PodCIDRs []netip.Prefix
	// ExternalCIDRs are the peer's external CIDRs.
	ExternalCIDRs []netip.Prefix
}

// Configuration builds the Configuration that declares a peer's network on
// this cluster.
func Configuration(o ConfigurationOptions) (*netv1beta1.Configuration, error) {
	conf := &netv1beta1.Configuration{
		TypeMeta:   typeMeta(KindConfiguration),
		ObjectMeta: o.objectMeta(nil),
		Spec: netv1beta1.ConfigurationSpec{
			Remote: netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{
				Pod:      netv1beta1.CIDRsOf(o.PodCIDRs),
				External: netv1beta1.CIDRsOf(o.ExternalCIDRs),
			}},
		},
	}
	return conf, check(conf)
}

// GatewayServerOptions are the inputs of GatewayServer.
type GatewayServerOptions struct {
	Peer
	// ServiceType exposes the gateway: NodePort, LoadBalancer or ClusterIP.
	ServiceType corev1.ServiceType
	// Port is the WireGuard port of the Service.
	Port int32
	// NodePort pins the node port; 0 lets Kubernetes allocate one.
	NodePort int32
	// LoadBalancerIP requests an address; the zero Addr requests none.
	LoadBalancerIP netip.Addr
	// MTU of the tunnel.
	MTU int
	// Replicas is the number of gateway pods; 0 is the API's default, one.
	Replicas int32
	// TemplateName and TemplateNamespace select the gateway template; an empty
	// name is the default template, an empty namespace lets the controller use
	// its own.
	TemplateName, TemplateNamespace string
}

// GatewayServer builds the server side of a tunnel to a peer.
func GatewayServer(o GatewayServerOptions) (*netv1beta1.GatewayServer, error) {
	gw := &netv1beta1.GatewayServer{
		TypeMeta:   typeMeta(KindGatewayServer),
		ObjectMeta: o.objectMeta(nil),
		Spec: netv1beta1.GatewayServerSpec{
			ServerTemplateRef: templateRef(templates.ServerTemplateKind, netv1beta1.DefaultServerTemplateName, o.TemplateName, o.TemplateNamespace),
			MTU:               o.MTU,
			Replicas:          o.Replicas,
			Endpoint:          o.endpoint(),
		},
	}
	return gw, check(gw)
}

// endpoint is the spec.endpoint of the server o describes.
func (o GatewayServerOptions) endpoint() netv1beta1.Endpoint {
	ep := netv1beta1.Endpoint{Port: o.Port, ServiceType: o.ServiceType}
	if o.NodePort != 0 {
		ep.NodePort = &o.NodePort
	}
	if o.LoadBalancerIP.IsValid() {
		ip := o.LoadBalancerIP.String()
		ep.LoadBalancerIP = &ip
	}
	return ep
}

// Validate checks the endpoint, the MTU and the replicas of o by the rules of the
// GatewayServer it builds, leaving the peer out, so that the flags of a
// server can be checked before its peer is known. Errors are an
// *InvalidError naming the fields of spec.endpoint and spec.mtu.
func (o GatewayServerOptions) Validate() error {
	spec := field.NewPath("spec")
	errs := append(validateServerEndpoint(o.endpoint(), spec.Child("endpoint")), validateSet(o.MTU, spec.Child("mtu"), ValidateMTU)...)
	errs = append(errs, validateSet(o.Replicas, spec.Child("replicas"), ValidateReplicas)...)
	if len(errs) > 0 {
		return &InvalidError{Kind: KindGatewayServer, Fields: errs}
	}
	return nil
}

// GatewayClientOptions are the inputs of GatewayClient.
type GatewayClientOptions struct {
	Peer
	// Addresses of the server; empty while the peer has not sent them.
	Addresses []string
	// Port of the server; 0 while unknown.
	Port int32
	// Ports is Port in list form, for readers of the list; empty writes no
	// list. Its one entry must be Port.
	Ports []int32
	// Protocol of the tunnel; empty: UDP.
	Protocol corev1.Protocol
	// MTU of the tunnel.
	MTU int
	// Replicas is the number of gateway pods; 0 is the API's default, one.
	Replicas int32
	// TemplateName and TemplateNamespace select the gateway template.
	TemplateName, TemplateNamespace string
}

// GatewayClient builds the client side of a tunnel to a peer. Without
// addresses the client is a valid placeholder: the controller creates its
// keys and reports WaitingForEndpoint.
func GatewayClient(o GatewayClientOptions) (*netv1beta1.GatewayClient, error) {
	protocol := o.Protocol
	if protocol == "" {
		protocol = corev1.ProtocolUDP
	}
	gw := &netv1beta1.GatewayClient{
		TypeMeta:   typeMeta(KindGatewayClient),
		ObjectMeta: o.objectMeta(nil),
		Spec: netv1beta1.GatewayClientSpec{
			ClientTemplateRef: templateRef(templates.ClientTemplateKind, netv1beta1.DefaultClientTemplateName, o.TemplateName, o.TemplateNamespace),
			MTU:               o.MTU,
			Replicas:          o.Replicas,
			Endpoint: netv1beta1.GatewayClientEndpoint{
				Addresses: append([]string(nil), o.Addresses...),
				Port:      o.Port,
				Ports:     append([]int32(nil), o.Ports...),
				Protocol:  protocol,
			},
		},
	}
	return gw, check(gw)
}

// PublicKeyOptions are the inputs of PublicKey.
type PublicKeyOptions struct {
	// Peer names the object; RemoteClusterID is the cluster that owns the key.
	Peer
	// Key is the raw 32-byte public key.
	Key []byte
	// NextKey, when set, is the raw 32-byte key the gateway rotates to,
	// which the peer accepts too.
	NextKey []byte
}

// PublicKey builds the object that hands a gateway's public key to the peer.
func PublicKey(o PublicKeyOptions) (*netv1beta1.PublicKey, error) {
	pk := &netv1beta1.PublicKey{
		TypeMeta:   typeMeta(KindPublicKey),
		ObjectMeta: o.objectMeta(map[string]string{netv1beta1.GatewayResourceLabel: "true"}),
		Spec:       netv1beta1.PublicKeySpec{PublicKey: append([]byte(nil), o.Key...), NextPublicKey: append([]byte(nil), o.NextKey...)},
	}
	return pk, check(pk)
}

// Namespace builds a namespace for the objects of a peer. Its Pod Security
// level is the one its gateway pod needs: privileged, since the pod adds
// NET_ADMIN and mounts /dev/net/tun from the host, which baseline forbids.
// Without the label a cluster enforcing baseline by default would reject
// the gateway pod, and only the ReplicaSet's events would say so.
func Namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "privileged",
			"pod-security.kubernetes.io/enforce-version": "latest",
		}},
	}
}

func templateRef(kind, defaultName, name, namespace string) corev1.ObjectReference {
	if name == "" {
		name = defaultName
	}
	return corev1.ObjectReference{
		APIVersion: netv1beta1.GroupVersion.String(),
		Kind:       kind,
		Name:       name,
		Namespace:  namespace,
	}
}
