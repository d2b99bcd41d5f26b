package gateway

import (
	"context"
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
	"github.com/peerlink/peerlink/templates"
)

// testTemplateFromLiqoNamespace gives gateways of the kind the template
// reference of Liqo's documentation, the default template in namespace
// liqo, which this cluster does not have: the installed default renders in
// its place and the gateway says so in a condition. A reference that names
// another template there, or the default in a namespace that exists, is
// still refused.
func testTemplateFromLiqoNamespace[T client.Object](t *testing.T, e *gatewayEnv, c gatewayCase[T]) {
	ns := e.namespace(t, "liqo-docs-"+strings.ToLower(c.name))
	clusterIP := netv1beta1.Endpoint{ServiceType: corev1.ServiceTypeClusterIP}
	kind, name := templates.ClientTemplateKind, netv1beta1.DefaultClientTemplateName
	if c.server {
		kind, name = templates.ServerTemplateKind, netv1beta1.DefaultServerTemplateName
	}
	ref := func(name, namespace string) corev1.ObjectReference {
		return corev1.ObjectReference{APIVersion: netv1beta1.GroupVersion.String(), Kind: kind, Name: name, Namespace: namespace}
	}

	e.create(t, c.new(peerMeta(ns, "docs", "remote-"+ns+"-d"), netv1beta1.GatewayServerSpec{ServerTemplateRef: ref(name, "liqo"), Endpoint: clusterIP}))
	want := fmt.Sprintf("%s.namespace: namespace liqo does not exist in this cluster: rendering the installed default %s %s/%s instead",
		c.templateField, kind, templates.InstallNamespace, name)
	eventually(t, "the default template rendered in place of liqo's", func(ctx context.Context) error {
		gw := c.named(ns, "docs")
		if err := e.get(ctx, ns, "docs", gw); err != nil {
			return err
		}
		conds := c.status(gw).common.Conditions
		if err := conditionIs(conds, gw.GetGeneration(), netv1beta1.ConditionTemplateSubstituted, metav1.ConditionTrue, netv1beta1.ReasonNamespaceNotFound); err != nil {
			return err
		}
		if msg := meta.FindStatusCondition(conds, netv1beta1.ConditionTemplateSubstituted).Message; msg != want {
			return fmt.Errorf("condition message %q, want %q", msg, want)
		}
		if s := meta.FindStatusCondition(conds, netv1beta1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue {
			return fmt.Errorf("stalled: %s", s.Message)
		}
		return e.get(ctx, ns, "docs", c.renderedObject(ns, "docs"))
	})

	stalled := func(reason, message string) func(T) error {
		return func(g T) error {
			conds := c.status(g).common.Conditions
			if meta.FindStatusCondition(conds, netv1beta1.ConditionTemplateSubstituted) != nil {
				return fmt.Errorf("a %s condition on a reference that is not substituted", netv1beta1.ConditionTemplateSubstituted)
			}
			return stalledWith(conds, reason, message)
		}
	}
	e.create(t, c.new(peerMeta(ns, "other-name", "remote-"+ns+"-o"), netv1beta1.GatewayServerSpec{ServerTemplateRef: ref("custom", "liqo"), Endpoint: clusterIP}))
	c.waitReady(t, e, ns, "other-name", metav1.ConditionFalse, ReasonTemplateNotAllowed, stalled(ReasonTemplateNotAllowed,
		fmt.Sprintf("%s.namespace: \"liqo\": templates come only from the install namespace %s or the gateway's own namespace %s",
			c.templateField, templates.InstallNamespace, ns)))

	elsewhere := e.namespace(t, ns+"-templates")
	e.create(t, c.new(peerMeta(ns, "existing-namespace", "remote-"+ns+"-e"), netv1beta1.GatewayServerSpec{ServerTemplateRef: ref(name, elsewhere), Endpoint: clusterIP}))
	c.waitReady(t, e, ns, "existing-namespace", metav1.ConditionFalse, ReasonTemplateNotAllowed, stalled(ReasonTemplateNotAllowed,
		fmt.Sprintf("%s.namespace: %q: templates come only from the install namespace %s or the gateway's own namespace %s",
			c.templateField, elsewhere, templates.InstallNamespace, ns)))
	for _, name := range []string{"other-name", "existing-namespace"} {
		e.checkNothingRendered(t, ns, name)
	}
}

// testLiqoServiceAccount renders a server template that, as Liqo's do,
// runs the gateway pod as ServiceAccount "{{ .Name }}", which no one made:
// the pod runs, as gw-<name>, the account with the gateway's rights.
func testLiqoServiceAccount(t *testing.T, e *gatewayEnv) {
	ns := e.namespace(t, "liqo-service-account")
	tmpl := defaultTemplate(t, 0, ns, "liqo-style")
	podSpec := []string{"spec", "template", "spec", "deployment", "spec", "template", "spec"}
	for _, field := range []string{"serviceAccount", "serviceAccountName"} {
		if err := unstructured.SetNestedField(tmpl.Object, "{{ .Name }}", append(podSpec, field)...); err != nil {
			t.Fatal(err)
		}
	}
	e.create(t, tmpl)
	gw := newGatewayServer(ns, "server", "remote-liqo-sa", corev1.ServiceTypeClusterIP, nil)
	gw.Spec.ServerTemplateRef = corev1.ObjectReference{Name: "liqo-style", Namespace: ns}
	e.create(t, gw)

	eventually(t, "a gateway pod running as gw-server", func(ctx context.Context) error {
		var dep appsv1.Deployment
		if err := e.get(ctx, ns, "gw-server", &dep); err != nil {
			return err
		}
		// The API server fills the deprecated serviceAccount from
		// serviceAccountName; the template's "{{ .Name }}" must be gone.
		if sa, old := dep.Spec.Template.Spec.ServiceAccountName, dep.Spec.Template.Spec.DeprecatedServiceAccount; sa != "gw-server" || (old != "" && old != sa) {
			return fmt.Errorf("deployment runs as serviceAccountName %q, serviceAccount %q; want gw-server for both", sa, old)
		}
		var pods corev1.PodList
		if err := e.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(dep.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("no pod of deployment %s/gw-server yet", ns)
		}
		if sa := pods.Items[0].Spec.ServiceAccountName; sa != "gw-server" {
			return fmt.Errorf("pod %s runs as %q, want gw-server", pods.Items[0].Name, sa)
		}
		return nil
	})
}
