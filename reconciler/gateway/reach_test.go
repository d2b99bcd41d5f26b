package gateway

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/apply"
)

// testTemplateReach gives gateways templates that would make the controller
// create what a gateway does not need: a built-in kind, a template from a
// namespace that is neither the install namespace nor the gateway's, an
// object in another namespace. Each gateway stalls, naming the field and
// the rule, and nothing is created.
func testTemplateReach(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "gws-reach")
	elsewhere := e.namespace(t, "gws-reach-elsewhere")
	template := func(ns, name, apiVersion, kind, renderNS string) {
		t.Helper()
		tmpl := defaultTemplate(t, 0, ns, name)
		if err := unstructured.SetNestedStringMap(tmpl.Object, map[string]string{"apiVersion": apiVersion, "kind": kind}, "spec", "objectKind"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(tmpl.Object, renderNS, "spec", "template", "metadata", "namespace"); err != nil {
			t.Fatal(err)
		}
		if err := e.c.Create(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, templateNS, apiVersion, kind, renderNS, reason, want string
	}{
		{"daemonset", ns, "apps/v1", "DaemonSet", "{{ .Namespace }}", ReasonTemplateNotAllowed,
			"spec.serverTemplateRef: the template's spec.objectKind renders apps/v1 DaemonSet, a kind built into Kubernetes"},
		{"rolebinding", ns, "rbac.authorization.k8s.io/v1", "RoleBinding", "{{ .Namespace }}", ReasonTemplateNotAllowed,
			"renders rbac.authorization.k8s.io/v1 RoleBinding, a kind built into Kubernetes"},
		{"secret", ns, "v1", "Secret", "{{ .Namespace }}", ReasonTemplateNotAllowed, "renders v1 Secret, a kind built into Kubernetes"},
		{"client-kind", ns, "networking.liqo.io/v1beta1", "WgGatewayClient", "{{ .Namespace }}", ReasonTemplateNotAllowed,
			"renders networking.liqo.io/v1beta1 WgGatewayClient: a template renders only WgGatewayServer"},
		{"third-namespace", elsewhere, "networking.liqo.io/v1beta1", "WgGatewayServer", "{{ .Namespace }}", ReasonTemplateNotAllowed,
			`spec.serverTemplateRef.namespace: "gws-reach-elsewhere": templates come only from the install namespace peerlink or the gateway's own namespace gws-reach`},
		{"other-namespace", ns, "networking.liqo.io/v1beta1", "WgGatewayServer", elsewhere, ReasonInvalidTemplate,
			`metadata.namespace: renders "gws-reach-elsewhere", but the rendered object is always "gws-reach"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			template(tc.templateNS, tc.name, tc.apiVersion, tc.kind, tc.renderNS)
			gw := newGatewayServer(ns, tc.name, "remote-"+tc.name, corev1.ServiceTypeClusterIP, nil)
			gw.Spec.ServerTemplateRef = corev1.ObjectReference{Name: tc.name, Namespace: tc.templateNS}
			e.create(t, gw)
			gatewayServerKind().waitReady(t, e, ns, tc.name, metav1.ConditionFalse, tc.reason, func(g *netv1beta1.GatewayServer) error {
				c := meta.FindStatusCondition(g.Status.Conditions, netv1beta1.ConditionStalled)
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != tc.reason || !strings.Contains(c.Message, tc.want) {
					return fmt.Errorf("stalled condition %+v, want %s with %q", c, tc.reason, tc.want)
				}
				if g.Status.ServerRef != nil {
					return fmt.Errorf("status.serverRef %+v: something was rendered", g.Status.ServerRef)
				}
				return nil
			})
		})
	}
	// Nothing of any of them exists, in either namespace.
	for _, list := range []struct {
		apiVersion, kind string
	}{{"apps/v1", "DaemonSetList"}, {"rbac.authorization.k8s.io/v1", "RoleBindingList"}, {"v1", "SecretList"},
		{"networking.liqo.io/v1beta1", "WgGatewayServerList"}, {"networking.liqo.io/v1beta1", "WgGatewayClientList"}, {"apps/v1", "DeploymentList"}} {
		for _, n := range []string{ns, elsewhere} {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion(list.apiVersion)
			l.SetKind(list.kind)
			if err := e.c.List(ctx, l, client.InNamespace(n)); err != nil {
				t.Fatal(err)
			}
			if len(l.Items) > 0 {
				t.Errorf("%s in %s: %d objects were created, the first %s", list.kind, n, len(l.Items), l.Items[0].GetName())
			}
		}
	}
}

// testNoAdoption puts objects under the names a gateway's children take
// before the gateway exists: a Deployment and a key Secret someone else
// made. The gateway stalls naming each, and neither is changed.
func testNoAdoption(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	ns := e.namespace(t, "wg-foreign")
	for _, tc := range []struct {
		name   string
		object client.Object
		want   string
	}{
		{"deployment", &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw-dep", Labels: map[string]string{"mine": "yes"}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}},
				},
			},
		}, "Deployment " + ns + "/gw-dep exists and is not controlled by WgGatewayServer dep"},
		{"secret", &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw-sec", Labels: map[string]string{"mine": "yes"}},
			Data:       map[string][]byte{netv1beta1.PrivateKeyField: make([]byte, 32), netv1beta1.PublicKeyField: make([]byte, 32)},
		}, "Secret " + ns + "/gw-sec exists and is not controlled by WgGatewayServer sec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.create(t, tc.object)
			before := tc.object.GetGeneration()
			name := strings.TrimPrefix(tc.object.GetName(), "gw-")
			e.create(t, &netv1beta1.WgGatewayServer{ObjectMeta: peerMeta(ns, name, "remote-1"),
				Spec: wgSpec(name, gatewayServiceTemplate(name, corev1.ServiceTypeClusterIP, 0))})
			wgGatewayServerKind().waitReady(t, e, ns, name, metav1.ConditionFalse, apply.ReasonForeignObject, func(wg *netv1beta1.WgGatewayServer) error {
				c := meta.FindStatusCondition(wg.Status.Conditions, netv1beta1.ConditionStalled)
				if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, tc.want) {
					return fmt.Errorf("stalled condition %+v, want %q", c, tc.want)
				}
				return nil
			})
			got := tc.object.DeepCopyObject().(client.Object)
			if err := e.get(ctx, ns, tc.object.GetName(), got); err != nil {
				t.Fatal(err)
			}
			// The generation counts changes of the spec (a Secret has
			// none: its data is compared through the labels' absence of
			// change and the owner).
			if got.GetGeneration() != before || len(got.GetOwnerReferences()) != 0 || len(got.GetLabels()) != 1 {
				t.Errorf("%s %s was changed: generation %d -> %d, owners %v, labels %v", tc.name, got.GetName(), before, got.GetGeneration(), got.GetOwnerReferences(), got.GetLabels())
			}
			if sec, ok := got.(*corev1.Secret); ok && !bytes.Equal(sec.Data[netv1beta1.PrivateKeyField], make([]byte, 32)) {
				t.Errorf("the foreign Secret's key was replaced")
			}
		})
	}
}
