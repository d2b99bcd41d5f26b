package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TemplateSpec is the body of a gateway template: the kind to produce and the
// templated object, whose strings are Go text/templates and whose keys may
// start with ? to be optional.
type TemplateSpec struct {
	// ObjectKind is the kind of object the template produces.
	ObjectKind ObjectKind `json:"objectKind"`
	// Template holds the templated metadata and spec of the produced object.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MinProperties=1
	Template runtime.RawExtension `json:"template"`
}

// WgGatewayServerTemplate is rendered into the gateway of a GatewayServer.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=wggst;wgst,categories=liqo
type WgGatewayServerTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TemplateSpec `json:"spec"`
}

// WgGatewayServerTemplateList is a list of WgGatewayServerTemplate.
//
// +kubebuilder:object:root=true
type WgGatewayServerTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WgGatewayServerTemplate `json:"items"`
}

// WgGatewayClientTemplate is rendered into the gateway of a GatewayClient.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=wggct;wgct,categories=liqo
type WgGatewayClientTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TemplateSpec `json:"spec"`
}

// WgGatewayClientTemplateList is a list of WgGatewayClientTemplate.
//
// +kubebuilder:object:root=true
type WgGatewayClientTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WgGatewayClientTemplate `json:"items"`
}
