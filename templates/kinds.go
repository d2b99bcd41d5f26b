package templates

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// The controller applies what a template renders with its own rights, so a
// template must not be a way to create anything else: it renders the one
// WgGateway kind of its gateway, or a kind the installer allowed, and never
// a kind built into Kubernetes (a DaemonSet, a RoleBinding, a Secret).

// RenderedKind is the kind a gateway's template renders by default: the
// WgGatewayServer of a GatewayServer, the WgGatewayClient of a
// GatewayClient.
func RenderedKind(server bool) schema.GroupVersionKind {
	if server {
		return netv1beta1.GroupVersion.WithKind("WgGatewayServer")
	}
	return netv1beta1.GroupVersion.WithKind("WgGatewayClient")
}

// IsBuiltinGroup reports whether group is an API group of Kubernetes
// itself: the core group, a group without a dot (apps, batch, policy, ...)
// or one under k8s.io or kubernetes.io.
func IsBuiltinGroup(group string) bool {
	return !strings.Contains(group, ".") ||
		strings.HasSuffix(group, ".k8s.io") || group == "k8s.io" ||
		strings.HasSuffix(group, ".kubernetes.io") || group == "kubernetes.io"
}

// CheckKind returns nil when a template may render an object of kind got
// for a gateway whose kind renders want by default: got is want, or one of
// extra, and never a built-in kind. The error names the rule.
func CheckKind(got, want schema.GroupVersionKind, extra []schema.GroupVersionKind) error {
	if IsBuiltinGroup(got.Group) {
		return fmt.Errorf("renders %s, a kind built into Kubernetes: a template renders only %s (or a kind the installer allows with --allowed-template-kind)", describeKind(got), want.Kind)
	}
	if got == want {
		return nil
	}
	for _, k := range extra {
		if got == k {
			return nil
		}
	}
	return fmt.Errorf("renders %s: a template renders only %s (or a kind the installer allows with --allowed-template-kind)", describeKind(got), want.Kind)
}

// ParseKind parses a kind as the --allowed-template-kind flag writes it:
// group/version/Kind. A built-in kind is refused: no flag makes the
// controller create one from a template.
func ParseKind(s string) (schema.GroupVersionKind, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("%q: want group/version/Kind, such as example.org/v1/MyGateway", s)
	}
	k := schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}
	if IsBuiltinGroup(k.Group) {
		return schema.GroupVersionKind{}, fmt.Errorf("%q: a kind of the Kubernetes API group %q is never rendered from a template", s, k.Group)
	}
	return k, nil
}

// describeKind writes a kind as apiVersion and kind.
func describeKind(k schema.GroupVersionKind) string {
	return k.GroupVersion().String() + " " + k.Kind
}
