package gateway

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// TestRemoveStaleSlices runs removeStaleSlices against a real API server:
// a gateway Service with a selector loses the slice an active replica
// wrote, one without loses the EndpointSlice controller's and its
// Endpoints, and another Service's stay.
func TestRemoveStaleSlices(t *testing.T) {
	c := testcluster.Start(t).Client
	ctx := t.Context()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}); err != nil {
		t.Fatal(err)
	}
	slice := func(name, service, manager string) {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, Labels: map[string]string{
				discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: manager,
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	names := func() []string {
		var list discoveryv1.EndpointSliceList
		if err := c.List(ctx, &list, client.InNamespace("tenant")); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list.Items {
			out = append(out, s.Name)
		}
		slices.Sort(out)
		return out
	}
	const controller = "endpointslice-controller.k8s.io"
	slice("gw-peer", "gw-peer", netv1beta1.GatewayEndpointSliceManager)
	slice("gw-peer-x7k2p", "gw-peer", controller)
	slice("web-abcde", "web", controller)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "gw-peer"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{netv1beta1.ActiveGatewayLabel: "true"}}}
	if err := removeStaleSlices(ctx, c, svc); err != nil {
		t.Fatal(err)
	}
	if got, want := names(), []string{"gw-peer-x7k2p", "web-abcde"}; !slices.Equal(got, want) {
		t.Errorf("with a selector: slices %v, want %v", got, want)
	}
	slice("gw-peer", "gw-peer", netv1beta1.GatewayEndpointSliceManager)
	for _, name := range []string{"gw-peer", "web"} {
		//lint:ignore SA1019 the deprecated Endpoints are what removeStaleSlices deletes
		if err := c.Create(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	svc.Spec.Selector = nil
	if err := removeStaleSlices(ctx, c, svc); err != nil {
		t.Fatal(err)
	}
	if got, want := names(), []string{"gw-peer", "web-abcde"}; !slices.Equal(got, want) {
		t.Errorf("without a selector: slices %v, want %v", got, want)
	}
	var eps corev1.EndpointsList
	if err := c.List(ctx, &eps, client.InNamespace("tenant")); err != nil {
		t.Fatal(err)
	}
	if len(eps.Items) != 1 || eps.Items[0].Name != "web" {
		t.Errorf("without a selector: Endpoints %v, want web's alone (the gateway Service's would be mirrored into a slice)", eps.Items)
	}
	// Nothing left to remove is no error.
	if err := removeStaleSlices(ctx, c, svc); err != nil {
		t.Errorf("second pass: %v", err)
	}
}
