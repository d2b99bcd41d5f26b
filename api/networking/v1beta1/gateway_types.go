package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons a gateway reports in its conditions.
const (
	// ReasonWaitingForEndpoint: a GatewayClient has no server address yet.
	ReasonWaitingForEndpoint = "WaitingForEndpoint"
	// ReasonNamespaceNotFound: the namespace a template reference names
	// does not exist in this cluster.
	ReasonNamespaceNotFound = "NamespaceNotFound"
)

// ConditionTemplateSubstituted is True on a gateway whose template
// reference names a default template (wireguard-server, wireguard-client)
// in a namespace this cluster does not have, such as Liqo's liqo: the
// default template installed with peerlink is rendered in its place
// (peerlink).
const ConditionTemplateSubstituted = "TemplateSubstituted"

// Bounds of the lists of a gateway's endpoint, as the CRD's maxItems and
// the CLI's validation enforce them: a client's server addresses come from
// the peer (peerlink).
const (
	// MaxEndpointAddresses bounds the addresses of a server endpoint.
	MaxEndpointAddresses = 16
	// MaxEndpointPorts bounds the list forms of a port (ports, nodePorts),
	// which validation holds to one entry anyway.
	MaxEndpointPorts = 16
)

// Endpoint is how a GatewayServer is exposed.
// +kubebuilder:validation:XValidation:rule="!has(self.nodePort) || self.nodePort == 0 || self.serviceType == 'NodePort' || self.serviceType == 'LoadBalancer'",message="spec.endpoint.nodePort is only allowed with serviceType NodePort or LoadBalancer",fieldPath=".nodePort"
// +kubebuilder:validation:XValidation:rule="!has(self.nodePorts) || self.nodePorts.all(p, p == 0) || self.serviceType == 'NodePort' || self.serviceType == 'LoadBalancer'",message="spec.endpoint.nodePorts is only allowed with serviceType NodePort or LoadBalancer",fieldPath=".nodePorts"
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || size(self.ports) <= 1",message="spec.endpoint.ports takes one port: a gateway runs one WireGuard tunnel, which listens on one port",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.nodePorts) || size(self.nodePorts) <= 1",message="spec.endpoint.nodePorts takes one node port: a gateway runs one WireGuard tunnel, which listens on one port",fieldPath=".nodePorts"
// +kubebuilder:validation:XValidation:rule="!has(self.loadBalancerIP) || self.serviceType == 'LoadBalancer'",message="spec.endpoint.loadBalancerIP is only allowed with serviceType LoadBalancer",fieldPath=".loadBalancerIP"
type Endpoint struct {
	// Port is the WireGuard port the Service exposes.
	// +kubebuilder:default=51840
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// ServiceType is the type of the gateway Service.
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`
	// NodePort pins the node port; 0 or absent lets Kubernetes allocate one.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	NodePort *int32 `json:"nodePort,omitempty"`
	// LoadBalancerIP requests an address from the load balancer.
	// +kubebuilder:validation:Format=ipv4
	// +optional
	LoadBalancerIP *string `json:"loadBalancerIP,omitempty"`
	// Ports is the list form of port that templates expand with their
	// +ports directive. A gateway listens on one port, so the list holds at
	// most one; when it holds one, that is the port, whatever port says.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +listType=atomic
	// +optional
	Ports []int32 `json:"ports,omitempty"`
	// NodePorts is the list form of nodePort, by position in ports: at most
	// one, which when set is the node port, whatever nodePort says.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=65535
	// +listType=atomic
	// +optional
	NodePorts []int32 `json:"nodePorts,omitempty"`
}

// Resolved returns e with each port field and its list form agreeing: port
// is ports[0] when ports has an entry, and ports is [port]; nodePort is
// nodePorts[0] when nodePorts has an entry, and nodePorts is [nodePort]
// when a node port is pinned. A template may then read either form.
func (e Endpoint) Resolved() Endpoint {
	if len(e.Ports) > 0 {
		e.Port = e.Ports[0]
	}
	e.Ports = []int32{e.Port}
	if len(e.NodePorts) > 0 && e.NodePorts[0] != 0 {
		np := e.NodePorts[0]
		e.NodePort = &np
	}
	e.NodePorts = nil
	if e.NodePort != nil && *e.NodePort != 0 {
		e.NodePorts = []int32{*e.NodePort}
	}
	return e
}

// EndpointStatus is where a gateway server is reachable.
// +kubebuilder:validation:XValidation:rule="!has(self.port) || !has(self.ports) || size(self.ports) == 0 || self.port == self.ports[0]",message="port must match ports[0]"
type EndpointStatus struct {
	// Addresses are IPs or host names of the server, first preferred.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	// +listType=atomic
	Addresses []string `json:"addresses,omitempty"`
	// Port is the server's reachable port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// Ports is port in list form, for readers of the list: [port].
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +listType=atomic
	// +optional
	Ports []int32 `json:"ports,omitempty"`
	// Protocol is the transport protocol of the tunnel.
	// +kubebuilder:validation:Enum=UDP;TCP
	// +optional
	Protocol *corev1.Protocol `json:"protocol,omitempty"`
}

// InternalGatewayEndpoint is the active gateway pod inside the cluster.
type InternalGatewayEndpoint struct {
	// IP of the active gateway pod.
	// +optional
	IP *IP `json:"ip,omitempty"`
	// Node running the active gateway pod.
	// +optional
	Node *string `json:"node,omitempty"`
}

// GatewayStatus is what every gateway kind reports beside its conditions:
// the Secret of its key pair, the public key it holds and the active pod.
type GatewayStatus struct {
	// SecretRef is the Secret holding the key pair.
	// +optional
	SecretRef *corev1.ObjectReference `json:"secretRef,omitempty"`
	// PublicKey is the public half of the key pair in SecretRef, published
	// so that the peer's PublicKey can be made without reading the Secret.
	// +optional
	PublicKey []byte `json:"publicKey,omitempty"`
	// InternalEndpoint is the active gateway pod.
	// +optional
	InternalEndpoint *InternalGatewayEndpoint `json:"internalEndpoint,omitempty"`
}

// GatewayServerSpec declares the server side of a tunnel.
type GatewayServerSpec struct {
	// ServerTemplateRef names the template rendered into the gateway. Empty
	// fields default to kind WgGatewayServerTemplate, name wireguard-server in
	// the peerlink namespace.
	// +optional
	ServerTemplateRef corev1.ObjectReference `json:"serverTemplateRef,omitempty"`
	// MTU of the tunnel; both sides must agree.
	// +kubebuilder:default=1340
	// +kubebuilder:validation:Minimum=576
	// +kubebuilder:validation:Maximum=9000
	// +optional
	MTU int `json:"mtu,omitempty"`
	// Replicas is the number of gateway pods: one carries the tunnel, the
	// others stand by, elected through a Lease, to take over when it goes
	// (peerlink).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// Endpoint is how the server is exposed.
	// +kubebuilder:default={}
	// +optional
	Endpoint Endpoint `json:"endpoint,omitempty"`
	// SecretRef names a Secret holding the key pair. Empty: the controller
	// generates the pair in-cluster, so no private key travels.
	// +optional
	SecretRef corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// KeyRotation asks for a new key pair: whenever it changes, the
	// controller makes a next pair in-cluster, the gateway moves the tunnel
	// to it once the peer accepts its public key (the PublicKey's
	// spec.nextPublicKey), losing no packet, and the pair replaces the old
	// one, which is forgotten. Any value will do, such as a date; it needs
	// a generated key pair (no spec.secretRef) (peerlink).
	// +kubebuilder:validation:MaxLength=63
	// +optional
	KeyRotation string `json:"keyRotation,omitempty"`
	// ServiceAnnotations are merged into the rendered Service, winning over the template.
	// +optional
	ServiceAnnotations map[string]string `json:"serviceAnnotations,omitempty"`
	// ServiceLabels are merged into the rendered Service, winning over the template.
	// +optional
	ServiceLabels map[string]string `json:"serviceLabels,omitempty"`
}

// GatewayServerStatus reports the rendered gateway and where it is reachable.
type GatewayServerStatus struct {
	CommonStatus `json:",inline"`
	// ServerRef is the rendered gateway object.
	// +optional
	ServerRef *corev1.ObjectReference `json:"serverRef,omitempty"`
	// Endpoint is where the peer's client connects.
	// +optional
	Endpoint *EndpointStatus `json:"endpoint,omitempty"`
	// KeyRotation reports the key rotation spec.keyRotation asks for.
	// +optional
	KeyRotation   *KeyRotationStatus `json:"keyRotation,omitempty"`
	GatewayStatus `json:",inline"`
}

// KeyRotationStatus reports a gateway's key rotation (peerlink).
type KeyRotationStatus struct {
	// Requested is the value of spec.keyRotation the controller acted on
	// last: a rotation is under way while the two differ.
	// +optional
	Requested string `json:"requested,omitempty"`
	// NextPublicKey is the public key of the next pair while a rotation is
	// under way: the peer's PublicKey carries it as spec.nextPublicKey.
	// +optional
	NextPublicKey []byte `json:"nextPublicKey,omitempty"`
	// Answering is the value of spec.keyRotation the rotation under way
	// answers: the last one asked since it started.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Answering string `json:"answering,omitempty"`
	// Started is when the rotation under way was last asked for: a
	// rotation that has not reached the next pair a while after says why
	// in the KeyRotation condition.
	// +optional
	Started *metav1.Time `json:"started,omitempty"`
	// InUseSince is when the gateway was first seen running the tunnel on
	// the next pair; the pair replaces the old one a while later.
	// +optional
	InUseSince *metav1.Time `json:"inUseSince,omitempty"`
}

// GatewayServer is the server side of the tunnel to a peer cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gws;gwserver,categories=liqo
// +kubebuilder:printcolumn:name="Template Kind",type=string,JSONPath=`.spec.serverTemplateRef.kind`,priority=1
// +kubebuilder:printcolumn:name="Template Name",type=string,JSONPath=`.spec.serverTemplateRef.name`
// +kubebuilder:printcolumn:name="Template Namespace",type=string,JSONPath=`.spec.serverTemplateRef.namespace`,priority=1
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.status.endpoint.addresses[*]`
// +kubebuilder:printcolumn:name="Port",type=string,JSONPath=`.status.endpoint.port`
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.status.endpoint.protocol`,priority=1
// +kubebuilder:printcolumn:name="MTU",type=integer,JSONPath=`.spec.mtu`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GatewayServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GatewayServerSpec   `json:"spec,omitempty"`
	Status GatewayServerStatus `json:"status,omitempty"`
}

// GatewayServerList is a list of GatewayServer.
//
// +kubebuilder:object:root=true
type GatewayServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GatewayServer `json:"items"`
}

// GatewayClientEndpoint is where the client finds the server. Addresses may be
// empty while the server's endpoint is not known yet.
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || size(self.ports) <= 1",message="spec.endpoint.ports takes one port: a gateway runs one WireGuard tunnel, which listens on one port",fieldPath=".ports"
// +kubebuilder:validation:XValidation:rule="!has(self.port) || !has(self.ports) || size(self.ports) == 0 || self.port == self.ports[0]",message="spec.endpoint.port must match spec.endpoint.ports[0]",fieldPath=".port"
type GatewayClientEndpoint struct {
	// Addresses are IPs or host names of the server, first preferred.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	// +listType=atomic
	Addresses []string `json:"addresses,omitempty"`
	// Port is the server's reachable port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// Protocol of the tunnel; WireGuard speaks UDP.
	// +kubebuilder:validation:Enum=UDP
	// +kubebuilder:default=UDP
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`
	// Ports is port in list form, as a server's status.endpoint.ports gives
	// it: the server listens on one port, so the list holds at most one,
	// which is the port; with port set too, the two must agree.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	// +listType=atomic
	// +optional
	Ports []int32 `json:"ports,omitempty"`
}

// Resolved returns e with port and its list form agreeing: port is
// ports[0] when ports has an entry, and ports is [port] once a port is
// known. A template, and the gateway, may then read either form.
func (e GatewayClientEndpoint) Resolved() GatewayClientEndpoint {
	if len(e.Ports) > 0 {
		e.Port = e.Ports[0]
	}
	e.Ports = nil
	if e.Port != 0 {
		e.Ports = []int32{e.Port}
	}
	return e
}

// GatewayClientSpec declares the client side of a tunnel.
type GatewayClientSpec struct {
	// ClientTemplateRef names the template rendered into the gateway. Empty
	// fields default to kind WgGatewayClientTemplate, name wireguard-client in
	// the peerlink namespace.
	// +optional
	ClientTemplateRef corev1.ObjectReference `json:"clientTemplateRef,omitempty"`
	// MTU of the tunnel; both sides must agree.
	// +kubebuilder:default=1340
	// +kubebuilder:validation:Minimum=576
	// +kubebuilder:validation:Maximum=9000
	// +optional
	MTU int `json:"mtu,omitempty"`
	// Replicas is the number of gateway pods: one carries the tunnel, the
	// others stand by, elected through a Lease, to take over when it goes
	// (peerlink).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// Endpoint is where the server is reachable.
	// +optional
	Endpoint GatewayClientEndpoint `json:"endpoint,omitempty"`
	// SecretRef names a Secret holding the key pair. Empty: the controller
	// generates the pair in-cluster.
	// +optional
	SecretRef corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// KeyRotation asks for a new key pair: whenever it changes, the
	// controller makes a next pair in-cluster, the gateway moves the tunnel
	// to it once the peer accepts its public key (the PublicKey's
	// spec.nextPublicKey), losing no packet, and the pair replaces the old
	// one, which is forgotten. Any value will do, such as a date; it needs
	// a generated key pair (no spec.secretRef) (peerlink).
	// +kubebuilder:validation:MaxLength=63
	// +optional
	KeyRotation string `json:"keyRotation,omitempty"`
}

// GatewayClientStatus reports the rendered gateway.
type GatewayClientStatus struct {
	CommonStatus `json:",inline"`
	// ClientRef is the rendered gateway object.
	// +optional
	ClientRef *corev1.ObjectReference `json:"clientRef,omitempty"`
	// KeyRotation reports the key rotation spec.keyRotation asks for.
	// +optional
	KeyRotation   *KeyRotationStatus `json:"keyRotation,omitempty"`
	GatewayStatus `json:",inline"`
}

// GatewayClient is the client side of the tunnel to a peer cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gwc;gwclient,categories=liqo
// +kubebuilder:printcolumn:name="Template Kind",type=string,JSONPath=`.spec.clientTemplateRef.kind`,priority=1
// +kubebuilder:printcolumn:name="Template Name",type=string,JSONPath=`.spec.clientTemplateRef.name`
// +kubebuilder:printcolumn:name="Template Namespace",type=string,JSONPath=`.spec.clientTemplateRef.namespace`,priority=1
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.spec.endpoint.addresses[*]`
// +kubebuilder:printcolumn:name="Port",type=string,JSONPath=`.spec.endpoint.port`
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.spec.endpoint.protocol`,priority=1
// +kubebuilder:printcolumn:name="MTU",type=integer,JSONPath=`.spec.mtu`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GatewayClient struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GatewayClientSpec   `json:"spec,omitempty"`
	Status GatewayClientStatus `json:"status,omitempty"`
}

// GatewayClientList is a list of GatewayClient.
//
// +kubebuilder:object:root=true
type GatewayClientList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GatewayClient `json:"items"`
}
