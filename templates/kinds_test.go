package templates

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCheckKind(t *testing.T) {
	server, client := RenderedKind(true), RenderedKind(false)
	extra := []schema.GroupVersionKind{{Group: "example.org", Version: "v1", Kind: "MyGateway"}}
	for _, tc := range []struct {
		got, want schema.GroupVersionKind
		err       string
	}{
		{got: server, want: server},
		{got: client, want: client},
		{got: extra[0], want: server},
		{got: client, want: server, err: "renders networking.liqo.io/v1beta1 WgGatewayClient: a template renders only WgGatewayServer"},
		{got: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, want: server, err: "apps/v1 DaemonSet, a kind built into Kubernetes"},
		{got: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, want: server, err: "v1 Secret, a kind built into Kubernetes"},
		{got: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, want: client, err: "built into Kubernetes"},
		{got: schema.GroupVersionKind{Group: "node.kubernetes.io", Version: "v1", Kind: "X"}, want: client, err: "built into Kubernetes"},
		{got: schema.GroupVersionKind{Group: "example.org", Version: "v2", Kind: "MyGateway"}, want: server, err: "example.org/v2 MyGateway: a template renders only"},
	} {
		err := CheckKind(tc.got, tc.want, extra)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckKind(%v, %v) = %v, want %q", tc.got, tc.want, err, tc.err)
		}
	}
}

func TestParseKind(t *testing.T) {
	if k, err := ParseKind("example.org/v1/MyGateway"); err != nil || k.Kind != "MyGateway" || k.Group != "example.org" {
		t.Errorf("ParseKind = %v, %v", k, err)
	}
	for _, bad := range []string{"apps/v1/DaemonSet", "/v1/Secret", "example.org/MyGateway", "rbac.authorization.k8s.io/v1/Role", "a/b/c/d"} {
		if _, err := ParseKind(bad); err == nil {
			t.Errorf("ParseKind(%q) accepted it", bad)
		}
	}
}
