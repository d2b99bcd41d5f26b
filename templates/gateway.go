package templates

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// InstallNamespace is the namespace the install bundle puts peerlink in, and
// with it the default templates.
const InstallNamespace = "peerlink"

// The workloads of the install bundle in InstallNamespace, each named and
// labelled app.kubernetes.io/name after itself.
const (
	ControllerDeployment = "peerlink-controller"
	FabricDaemonSet      = "peerlink-fabric"
)

// Kinds of the default templates.
const (
	ServerTemplateKind = "WgGatewayServerTemplate"
	ClientTemplateKind = "WgGatewayClientTemplate"
)

// DataForServer returns the variables for rendering the template of gw.
// uid is the gateway's UID, clusterID the remote cluster's ID and secretName
// the Secret holding the key pair (see KeySecretName). The spec's endpoint
// is resolved (see Endpoint.Resolved), so that .Spec.Endpoint.Port and
// .Spec.Endpoint.Ports, .Spec.Endpoint.NodePort and .Spec.Endpoint.NodePorts
// say the same whichever form the gateway was written with.
func DataForServer(gw *netv1beta1.GatewayServer, uid, clusterID, secretName string) Data {
	spec := gw.Spec
	spec.Endpoint = spec.Endpoint.Resolved()
	return newData(&gw.ObjectMeta, spec, uid, clusterID, secretName)
}

// DataForClient returns the variables for rendering the template of gw, like
// DataForServer: the endpoint is resolved (see GatewayClientEndpoint.Resolved),
// so that .Spec.Endpoint.Port and .Spec.Endpoint.Ports say the same.
func DataForClient(gw *netv1beta1.GatewayClient, uid, clusterID, secretName string) Data {
	spec := gw.Spec
	spec.Endpoint = spec.Endpoint.Resolved()
	return newData(&gw.ObjectMeta, spec, uid, clusterID, secretName)
}

func newData(meta *metav1.ObjectMeta, spec any, uid, clusterID, secretName string) Data {
	return Data{
		Spec:       spec,
		Name:       meta.Name,
		Namespace:  meta.Namespace,
		GatewayUID: uid,
		ClusterID:  clusterID,
		SecretName: secretName,
	}
}

// KeySecretName returns the name of the Secret holding a gateway's key pair:
// the user's spec.secretRef when set, else gw-<gatewayName>, which the
// controller generates in-cluster.
func KeySecretName(gatewayName string, secretRef corev1.LocalObjectReference) string {
	if secretRef.Name != "" {
		return secretRef.Name
	}
	return netv1beta1.GatewayObjectPrefix + gatewayName
}

// ServerTemplateRef returns spec.serverTemplateRef with each empty field
// defaulted: apiVersion networking.liqo.io/v1beta1, kind
// WgGatewayServerTemplate, name wireguard-server, namespace
// installNamespace (the controller's namespace).
func ServerTemplateRef(spec *netv1beta1.GatewayServerSpec, installNamespace string) corev1.ObjectReference {
	return templateRef(spec.ServerTemplateRef, ServerTemplateKind, netv1beta1.DefaultServerTemplateName, installNamespace)
}

// ClientTemplateRef returns spec.clientTemplateRef with each empty field
// defaulted, like ServerTemplateRef: kind WgGatewayClientTemplate, name
// wireguard-client.
func ClientTemplateRef(spec *netv1beta1.GatewayClientSpec, installNamespace string) corev1.ObjectReference {
	return templateRef(spec.ClientTemplateRef, ClientTemplateKind, netv1beta1.DefaultClientTemplateName, installNamespace)
}

// IsDefaultTemplate reports whether ref, its defaults resolved, names the
// default template of a server (or of a client) by apiVersion, kind and
// name, in whatever namespace.
func IsDefaultTemplate(ref corev1.ObjectReference, server bool) bool {
	kind, name := ClientTemplateKind, netv1beta1.DefaultClientTemplateName
	if server {
		kind, name = ServerTemplateKind, netv1beta1.DefaultServerTemplateName
	}
	return ref.APIVersion == netv1beta1.GroupVersion.String() && ref.Kind == kind && ref.Name == name
}

func templateRef(ref corev1.ObjectReference, kind, name, namespace string) corev1.ObjectReference {
	out := corev1.ObjectReference{
		APIVersion: ref.APIVersion,
		Kind:       ref.Kind,
		Name:       ref.Name,
		Namespace:  ref.Namespace,
	}
	if out.APIVersion == "" {
		out.APIVersion = netv1beta1.GroupVersion.String()
	}
	if out.Kind == "" {
		out.Kind = kind
	}
	if out.Name == "" {
		out.Name = name
	}
	if out.Namespace == "" {
		out.Namespace = namespace
	}
	return out
}

// RenderServer renders the template of a GatewayServer into the object the
// controller creates: Render, then gw's spec.serviceLabels and
// spec.serviceAnnotations merged over the labels and annotations the
// template gives spec.service.metadata (the gateway's win). A rendered kind
// without spec.service cannot take them: when gw sets any, that is an error.
func RenderServer(tmpl *unstructured.Unstructured, gw *netv1beta1.GatewayServer, data Data) (*unstructured.Unstructured, error) {
	obj, err := Render(tmpl, data)
	if err != nil {
		return nil, err
	}
	if len(gw.Spec.ServiceLabels) == 0 && len(gw.Spec.ServiceAnnotations) == 0 {
		return obj, nil
	}
	spec, _ := obj.Object["spec"].(map[string]any)
	svc, ok := spec["service"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("spec.serviceLabels, spec.serviceAnnotations: %s renders a %s without spec.service to merge them into", describe(tmpl), obj.GetKind())
	}
	md, ok := svc["metadata"].(map[string]any)
	if !ok {
		if svc["metadata"] != nil {
			return nil, fmt.Errorf("%s: spec.service.metadata: not an object", describe(tmpl))
		}
		md = map[string]any{}
		svc["metadata"] = md
	}
	for field, add := range map[string]map[string]string{
		"labels":      gw.Spec.ServiceLabels,
		"annotations": gw.Spec.ServiceAnnotations,
	} {
		if len(add) == 0 {
			continue
		}
		m, ok := md[field].(map[string]any)
		if !ok {
			if md[field] != nil {
				return nil, fmt.Errorf("%s: spec.service.metadata.%s: not an object", describe(tmpl), field)
			}
			m = map[string]any{}
			md[field] = m
		}
		for k, v := range add {
			m[k] = v
		}
	}
	return obj, nil
}
