package v1beta1

import (
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and names shared by the whole API.
const (
	// RemoteClusterIDLabel names the peer cluster an object belongs to. It is
	// mandatory on Configuration, GatewayServer, GatewayClient and PublicKey and
	// copied onto everything derived from them.
	RemoteClusterIDLabel = "liqo.io/remote-cluster-id"
	// GatewayResourceLabel marks PublicKey objects and gateway key Secrets.
	GatewayResourceLabel = "networking.liqo.io/gateway-resource"
	// ActiveGatewayLabel marks the gateway pod that currently carries traffic.
	ActiveGatewayLabel = "networking.liqo.io/active"
	// GatewayNameLabel names, on a gateway pod, the gateway it runs.
	GatewayNameLabel = "networking.liqo.io/gateway-name"
	// GatewayEndpointSliceManager is the endpointslice.kubernetes.io/managed-by
	// value of the EndpointSlice the active replica of a server writes for
	// its Service when the Service selects no pods (peerlink).
	GatewayEndpointSliceManager = "gateway.peerlink.io"
	// TenantNamespacePrefix starts the name of the namespace the CLI creates
	// for the objects of one peer: liqo-tenant-<remoteClusterID>.
	TenantNamespacePrefix = "liqo-tenant-"
	// GatewayObjectPrefix starts the name of everything a gateway produces:
	// Deployment, Service, key Secret and Connection are all gw-<gatewayName>.
	GatewayObjectPrefix = "gw-"
	// LocalCIDRsEnv is the environment variable the controller sets in
	// every container of a gateway pod: this cluster's pod and external
	// CIDRs, comma-separated, the only destinations the gateway lets out of
	// the tunnel (peerlink).
	LocalCIDRsEnv = "PEERLINK_LOCAL_CIDRS"
	// UnknownSourceEnv is the environment variable the controller sets in
	// every container of a gateway pod beside LocalCIDRsEnv: this cluster's
	// unknown-source address (the first of its external CIDR), which the
	// gateway gives to what the nodes send themselves (peerlink).
	UnknownSourceEnv = "PEERLINK_UNKNOWN_SOURCE"
	// ServiceLimitsEnv is the environment variable the controller sets in
	// every container of a gateway pod when this cluster bounds what a
	// peer may export otherwise than by default: the limits the gateway
	// holds the peer to, as "services=2000,endpoints=1000,..." (peerlink).
	ServiceLimitsEnv = "PEERLINK_SERVICE_LIMITS"
)

// Defaults of the API.
const (
	// DefaultMTU is the tunnel MTU when a gateway does not set one;
	// MinMTU and MaxMTU bound it (the +kubebuilder markers of spec.mtu
	// repeat them: markers take only literals).
	DefaultMTU = 1340
	MinMTU     = 576
	MaxMTU     = 9000
	// DefaultGatewayPort is the WireGuard listen port of a GatewayServer.
	DefaultGatewayPort = 51840
	// DefaultServerTemplateName names the default WgGatewayServerTemplate.
	DefaultServerTemplateName = "wireguard-server"
	// DefaultClientTemplateName names the default WgGatewayClientTemplate.
	DefaultClientTemplateName = "wireguard-client"
)

// Key names in a gateway key Secret. Each holds the raw 32 bytes of a key.
// The next key pair is optional: while it is there, the gateway switches its
// tunnel to it once the peer accepts it (key rotation), and keeps the current
// one otherwise.
const (
	PrivateKeyField     = "privateKey"
	PublicKeyField      = "publicKey"
	NextPrivateKeyField = "nextPrivateKey"
	NextPublicKeyField  = "nextPublicKey"
)

// kstatus condition types carried by every status.
const (
	// ConditionReady is True when the object's declared state is in effect.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the controller works towards Ready.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a change of the input.
	ConditionStalled = "Stalled"
)

// CIDR is an IP prefix in CIDR notation, such as 10.244.0.0/16.
// +kubebuilder:validation:Format=cidr
type CIDR string

// CIDRsOf returns prefixes as CIDRs, or nil when there are none.
func CIDRsOf(prefixes []netip.Prefix) []CIDR {
	if len(prefixes) == 0 {
		return nil
	}
	out := make([]CIDR, len(prefixes))
	for i, p := range prefixes {
		out[i] = CIDR(p.String())
	}
	return out
}

// IP is an address of either family, in its canonical form. (The peers'
// API says IPv4; an IPv6-only cluster's gateway pods have IPv6 addresses.
// The kinds that take IPv4 only, the IP kind's spec.ip, say so where they
// are reconciled.)
// +kubebuilder:validation:MaxLength=39
// +kubebuilder:validation:XValidation:rule="isIP(self) && ip.isCanonical(self)",message="must be an IPv4 or IPv6 address in canonical form"
type IP string

// ObjectKind names the kind of object a template produces.
type ObjectKind struct {
	// APIVersion of the produced object, such as networking.liqo.io/v1beta1.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Kind of the produced object, such as WgGatewayServer.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// CommonStatus is embedded in the status of every kind that has one: the
// kstatus conditions and the generation they describe.
type CommonStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions hold Ready, Reconciling and Stalled, plus kind-specific ones.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
