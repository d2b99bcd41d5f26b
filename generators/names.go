package generators

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// maxClusterIDLength keeps liqo-tenant-<id> within the 63 characters of a
// namespace name.
const maxClusterIDLength = validation.DNS1123LabelMaxLength - len(netv1beta1.TenantNamespacePrefix)

// TenantNamespace is the namespace the CLI uses for the objects of one peer.
func TenantNamespace(remoteClusterID string) string {
	return netv1beta1.TenantNamespacePrefix + remoteClusterID
}

// GatewayObjectName is the name of everything a gateway produces: its
// Deployment, Service, key Secret and Connection.
func GatewayObjectName(gatewayName string) string {
	return netv1beta1.GatewayObjectPrefix + gatewayName
}

// ValidateClusterID checks that id can name a peer: it is used as a label
// value, as the default object name and inside the tenant namespace name, so
// it must be a DNS-1123 label short enough for liqo-tenant-<id>.
func ValidateClusterID(id string) error {
	if id == "" {
		return fmt.Errorf("cluster id is empty")
	}
	if msgs := validation.IsDNS1123Label(id); len(msgs) > 0 {
		return fmt.Errorf("cluster id %q is not valid: %s", id, strings.Join(msgs, "; "))
	}
	if len(id) > maxClusterIDLength {
		return fmt.Errorf("cluster id %q is longer than %d characters, so %s%s is not a valid namespace name",
			id, maxClusterIDLength, netv1beta1.TenantNamespacePrefix, id)
	}
	return nil
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
