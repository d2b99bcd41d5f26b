package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/peerlink/peerlink/api/gatewayrole"
)

// ConnectionType is the role of the gateway that owns a Connection.
// +kubebuilder:validation:Enum=Server;Client
type ConnectionType string

// Connection roles.
const (
	ConnectionTypeServer ConnectionType = "Server"
	ConnectionTypeClient ConnectionType = "Client"
)

// ConnectionTypeOf is the type of the Connection that reports the tunnel of
// a gateway of role r.
func ConnectionTypeOf(r gatewayrole.Role) ConnectionType {
	if r == gatewayrole.Server {
		return ConnectionTypeServer
	}
	return ConnectionTypeClient
}

// PeerRangeView is one range of this cluster as the peer reaches it.
type PeerRangeView struct {
	// CIDR is this cluster's range.
	CIDR CIDR `json:"cidr"`
	// SeenAs is the range the peer reaches it at.
	SeenAs CIDR `json:"seenAs"`
}

// ConnectionStatusValue is the health of a tunnel.
// +kubebuilder:validation:Enum=Connecting;Connected;Error
type ConnectionStatusValue string

// Tunnel health values.
const (
	Connecting ConnectionStatusValue = "Connecting"
	Connected  ConnectionStatusValue = "Connected"
	// ConnectionError means health pings have gone unanswered.
	ConnectionError ConnectionStatusValue = "Error"
)

// ConnectionSpec names the gateway whose tunnel is reported.
type ConnectionSpec struct {
	// Type is the role of the gateway.
	Type ConnectionType `json:"type"`
	// GatewayRef is the GatewayServer or GatewayClient owning the tunnel.
	GatewayRef corev1.ObjectReference `json:"gatewayRef"`
}

// ConnectionLatency is the last measured round-trip time of the health ping.
type ConnectionLatency struct {
	// Value is the round-trip time, such as 1.2ms.
	// +optional
	Value string `json:"value,omitempty"`
	// Timestamp is when Value was measured.
	// +optional
	Timestamp metav1.Time `json:"timestamp,omitempty"`
}

// ConnectionStatus is the measured health of a tunnel.
type ConnectionStatus struct {
	CommonStatus `json:",inline"`
	// Value is the tunnel's health.
	// +optional
	Value ConnectionStatusValue `json:"value,omitempty"`
	// Latency is the last measured round-trip time.
	// +optional
	Latency ConnectionLatency `json:"latency,omitempty"`
	// PathMTU is the largest packet, in bytes, that crosses the tunnel:
	// the configured MTU when full-size probes pass, less when the path
	// between the gateways carries less (peerlink). Absent until measured.
	// +optional
	PathMTU int32 `json:"pathMTU,omitempty"`
	// PeerMTU is the tunnel MTU, in bytes, the peer's gateway announces
	// through the tunnel (peerlink). Absent while unknown: not heard yet,
	// or a peer of a release that does not announce it.
	// +optional
	PeerMTU int32 `json:"peerMTU,omitempty"`
	// PeerView is how the peer reaches this cluster's ranges, as the
	// peer's gateway announces through the tunnel (peerlink): each range
	// with the one the peer remapped it to (the same when it routes it as
	// it is). Only shown: nothing is routed by it. Absent while unknown.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	PeerView []PeerRangeView `json:"peerView,omitempty"`
	// PublicKey is the gateway's public key the tunnel runs on (peerlink):
	// the next key of its key Secret once the peer accepted it and a
	// handshake with it succeeded, the current one otherwise.
	// +optional
	PublicKey []byte `json:"publicKey,omitempty"`
}

// ConditionPathMTUReduced, on a Connection, is True when the measured path
// MTU is below the gateway's configured MTU: TCP is clamped to it, larger
// packets of other protocols are lost (peerlink).
const ConditionPathMTUReduced = "PathMTUReduced"

// ConditionMTUMismatch, on a Connection, is True when the peer's gateway
// announces a tunnel MTU other than the one this gateway runs with; its
// message names both (peerlink). Both sides must have the same MTU. It is
// absent while the peer's MTU is unknown (status.peerMTU absent).
const ConditionMTUMismatch = "MTUMismatch"

// ConditionKeyRotation, on a Connection, is True while the gateway rotates
// its own key pair; its reason says where the rotation stands and its
// message what it waits for (peerlink). It is absent when none is under
// way. On a GatewayServer or GatewayClient it reports the rotation
// spec.keyRotation asked for: True while under way, False once done, or
// once it has waited too long for a step (the reason names the step).
const ConditionKeyRotation = "KeyRotation"

// Reasons of the KeyRotation condition.
const (
	// ReasonNextKeyNotRead: the controller made the next pair, the gateway
	// has not read it from its key Secret yet.
	ReasonNextKeyNotRead = "NextKeyNotRead"
	// ReasonPeerNotAccepting: the peer's gateway does not announce that it
	// accepts the next key: its PublicKey of this cluster lacks
	// spec.nextPublicKey.
	ReasonPeerNotAccepting = "PeerNotAccepting"
	// ReasonSwitching: the tunnel moved to the next key and waits for a
	// handshake with it.
	ReasonSwitching = "Switching"
	// ReasonNoHandshake: no handshake came on the next key in time; the
	// tunnel went back to the current key and tries again later.
	ReasonNoHandshake = "NoHandshake"
	// ReasonTunnelDown: the tunnel does not carry the health messages in
	// which the peer announces the keys it accepts.
	ReasonTunnelDown = "TunnelDown"
	// ReasonOnNextKey: the tunnel runs on the next key.
	ReasonOnNextKey = "OnNextKey"
	// ReasonRotated: the next pair replaced the old one.
	ReasonRotated = "Rotated"
)

// Connection reports the health of a gateway's tunnel. The gateway agent
// creates it, named gw-<gateway>.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=conn,categories=liqo
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.value`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Latency",type=string,JSONPath=`.status.latency.value`,priority=1
type Connection struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConnectionSpec   `json:"spec"`
	Status ConnectionStatus `json:"status,omitempty"`
}

// ConnectionList is a list of Connection.
//
// +kubebuilder:object:root=true
type ConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Connection `json:"items"`
}
