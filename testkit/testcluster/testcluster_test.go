package testcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/testkit/testenv"
)

func TestControllerManager(t *testing.T) {
	c := Start(t, WithControllerManager())
	ctx := t.Context()

	t.Run("version", func(t *testing.T) {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		want := kubernetesPin(t, filepath.Join(root, "hack", "kube", "go.mod"))
		dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		v, err := dc.ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != want {
			t.Errorf("API server reports %s, want %s", v.GitVersion, want)
		}
	})

	t.Run("garbage collection", func(t *testing.T) {
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owner"}}
		if err := c.Client.Create(ctx, owner); err != nil {
			t.Fatal(err)
		}
		dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: "default",
			Name:      "dependent",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "ConfigMap",
				Name:       owner.Name,
				UID:        owner.UID,
			}},
		}}
		if err := c.Client.Create(ctx, dependent); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Delete(ctx, owner); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true,
			func(ctx context.Context) (bool, error) {
				err := c.Client.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{})
				if apierrors.IsNotFound(err) {
					return true, nil
				}
				return false, err
			})
		if err != nil {
			t.Fatalf("dependent ConfigMap not garbage collected: %v", err)
		}
	})

	t.Run("root CA publisher", func(t *testing.T) {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true,
			func(ctx context.Context) (bool, error) {
				var cm corev1.ConfigMap
				err := c.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "kube-root-ca.crt"}, &cm)
				return err == nil && strings.Contains(cm.Data["ca.crt"], "BEGIN CERTIFICATE"), nil
			})
		if err != nil {
			t.Fatalf("no kube-root-ca.crt ConfigMap: %v", err)
		}
	})

	t.Run("kubectl", func(t *testing.T) {
		out, stderr, err := c.Kubectl("get", "ns")
		if err != nil {
			t.Fatalf("%v: %s", err, stderr)
		}
		if !strings.Contains(out, "default") {
			t.Errorf("kubectl get ns does not list default:\n%s", out)
		}
		if _, _, err := c.Kubectl("get", "no-such-kind"); err == nil {
			t.Error("kubectl get no-such-kind succeeded")
		}
	})
}

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.peerlink.io
spec:
  group: test.peerlink.io
  names:
    kind: Widget
    listKind: WidgetList
    plural: widgets
    singular: widget
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: self.min <= self.max
              message: min must not exceed max
            properties:
              min:
                type: integer
              max:
                type: integer
`

func widget(name string, lo, hi int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.peerlink.io/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"namespace": "default", "name": name},
		"spec":       map[string]any{"min": lo, "max": hi},
	}}
	return u
}

func TestValidation(t *testing.T) {
	crd := &unstructured.Unstructured{}
	if err := utilyaml.Unmarshal([]byte(widgetCRD), &crd.Object); err != nil {
		t.Fatal(err)
	}
	c := Start(t, WithObjects(crd, widget("good", 1, 2)))
	ctx := t.Context()

	t.Run("objects applied", func(t *testing.T) {
		got := widget("", 0, 0)
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "good"}, got); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("CRD CEL rule", func(t *testing.T) {
		err := c.Client.Create(ctx, widget("bad", 3, 2))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "min must not exceed max") {
			t.Fatalf("creating an invalid Widget: got %v, want the CEL rule's message", err)
		}
	})

	t.Run("ValidatingAdmissionPolicy", func(t *testing.T) {
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "no-forbidden-key"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
						RuleWithOperations: admissionregistrationv1.RuleWithOperations{
							Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
							Rule: admissionregistrationv1.Rule{
								APIGroups:   []string{""},
								APIVersions: []string{"v1"},
								Resources:   []string{"configmaps"},
							},
						},
					}},
				},
				Validations: []admissionregistrationv1.Validation{{
					Expression: "!has(object.data) || !('forbidden' in object.data)",
					Message:    "key forbidden is not allowed",
				}},
			},
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "no-forbidden-key"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        policy.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		}
		for _, o := range []client.Object{policy, binding} {
			if err := c.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		// The API server picks the policy up asynchronously.
		var last error
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true,
			func(ctx context.Context) (bool, error) {
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "vap-"},
					Data:       map[string]string{"forbidden": "x"},
				}
				last = c.Client.Create(ctx, cm)
				return last != nil, nil
			})
		if err != nil {
			t.Fatalf("ConfigMap with a forbidden key still admitted: %v", err)
		}
		if !strings.Contains(last.Error(), "key forbidden is not allowed") {
			t.Errorf("rejected with %v, want the policy's message", last)
		}
	})
}

// kubernetesPin returns the version of k8s.io/kubernetes required by the
// go.mod file at path.
func kubernetesPin(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "k8s.io/kubernetes" && strings.HasPrefix(f[i+1], "v1.") {
				return f[i+1]
			}
		}
	}
	t.Fatalf("no k8s.io/kubernetes requirement in %s", path)
	return ""
}
