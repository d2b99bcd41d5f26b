package manifests

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// TenantNamespace is the namespace the CLI uses for the objects of one peer.
func TenantNamespace(remoteClusterID string) string {
	return netv1beta1.TenantNamespacePrefix + remoteClusterID
}

// ObjectRef names an object as namespace/name, or name alone when it is not
// namespaced.
func ObjectRef(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// GatewayObjectName is the name of everything a gateway produces: its
// Deployment, Service, key Secret and Connection.
func GatewayObjectName(gatewayName string) string {
	return netv1beta1.GatewayObjectPrefix + gatewayName
}

// ValidateObjectName checks that name can name a peerlink object and the
// gw-<name> objects derived from it, the strictest of which is a Service
// (a DNS-1035 label).
func ValidateObjectName(name string) error {
	if name == "" {
		return fmt.Errorf("name is empty")
	}
	if msgs := validation.IsDNS1035Label(GatewayObjectName(name)); len(msgs) > 0 {
		return fmt.Errorf("name %q is not valid: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// ValidateNamespace checks a namespace name.
func ValidateNamespace(ns string) error {
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return fmt.Errorf("namespace %q is not valid: %s", ns, strings.Join(msgs, "; "))
	}
	return nil
}
