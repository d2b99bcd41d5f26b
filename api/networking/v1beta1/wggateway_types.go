package v1beta1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceTemplate is the Service a WgGatewayServer exposes.
type ServiceTemplate struct {
	// Metadata of the Service; name and namespace are set by the controller.
	// +optional
	Metadata TemplateMetadata `json:"metadata,omitempty"`
	// Spec of the Service.
	Spec corev1.ServiceSpec `json:"spec"`
}

// DeploymentTemplate is the Deployment running a gateway.
type DeploymentTemplate struct {
	// Metadata of the Deployment; name and namespace are set by the controller.
	// +optional
	Metadata TemplateMetadata `json:"metadata,omitempty"`
	// Spec of the Deployment.
	Spec appsv1.DeploymentSpec `json:"spec"`
}

// TemplateMetadata is the part of object metadata a template may set.
type TemplateMetadata struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Metrics configures the gateway's Prometheus endpoint.
type Metrics struct {
	// Enabled turns the metrics endpoint on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Port of the metrics endpoint.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
}

// WgGatewayServerSpec is a rendered WireGuard gateway server.
type WgGatewayServerSpec struct {
	// Service exposes the gateway.
	Service ServiceTemplate `json:"service"`
	// Deployment runs the gateway.
	Deployment DeploymentTemplate `json:"deployment"`
	// SecretRef names the Secret holding the key pair; empty: generated.
	// +optional
	SecretRef corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// Metrics configures the gateway's metrics endpoint.
	// +optional
	Metrics *Metrics `json:"metrics,omitempty"`
}

// WgGatewayServerStatus reports the objects created for a WgGatewayServer.
type WgGatewayServerStatus struct {
	CommonStatus `json:",inline"`
	// Endpoint is where the server is reachable.
	// +optional
	Endpoint      *EndpointStatus `json:"endpoint,omitempty"`
	GatewayStatus `json:",inline"`
}

// WgGatewayServer is a WireGuard gateway server rendered from a template.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wgs;wggs,categories=liqo
type WgGatewayServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WgGatewayServerSpec   `json:"spec"`
	Status WgGatewayServerStatus `json:"status,omitempty"`
}

// WgGatewayServerList is a list of WgGatewayServer.
//
// +kubebuilder:object:root=true
type WgGatewayServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WgGatewayServer `json:"items"`
}

// WgGatewayClientSpec is a rendered WireGuard gateway client.
type WgGatewayClientSpec struct {
	// Deployment runs the gateway.
	Deployment DeploymentTemplate `json:"deployment"`
	// SecretRef names the Secret holding the key pair; empty: generated.
	// +optional
	SecretRef corev1.LocalObjectReference `json:"secretRef,omitempty"`
	// Metrics configures the gateway's metrics endpoint.
	// +optional
	Metrics *Metrics `json:"metrics,omitempty"`
}

// WgGatewayClientStatus reports the objects created for a WgGatewayClient.
type WgGatewayClientStatus struct {
	CommonStatus  `json:",inline"`
	GatewayStatus `json:",inline"`
}

// WgGatewayClient is a WireGuard gateway client rendered from a template.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wgc;wggc,categories=liqo
type WgGatewayClient struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WgGatewayClientSpec   `json:"spec"`
	Status WgGatewayClientStatus `json:"status,omitempty"`
}

// WgGatewayClientList is a list of WgGatewayClient.
//
// +kubebuilder:object:root=true
type WgGatewayClientList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WgGatewayClient `json:"items"`
}
