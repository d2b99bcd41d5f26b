package gateway

import (
	"net/netip"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/mcs"
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

// TestGatewayDeploymentIPv6Forwarding checks the init container that turns
// on IPv6 forwarding: in the pods of a cluster with an IPv6 range, first
// among the init containers, privileged, with the gateway's image; never in
// an IPv4 cluster's, nor where the template sets the sysctl itself.
func TestGatewayDeploymentIPv6Forwarding(t *testing.T) {
	tmpl := func() netv1beta1.DeploymentTemplate {
		var d netv1beta1.DeploymentTemplate
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "gateway", Image: "registry.example/peerlink-agent:v1", ImagePullPolicy: corev1.PullIfNotPresent}}
		d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "user-init", Image: "busybox"}}
		return d
	}
	owner := metav1.OwnerReference{APIVersion: "networking.liqo.io/v1beta1", Kind: "WgGatewayServer", Name: "b", UID: "u"}
	v4 := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.70.0.0/16")}
	dual := append(slices.Clone(v4), netip.MustParsePrefix("fd44::/48"))

	inits := func(d *appsv1.Deployment) []string {
		var names []string
		for _, c := range d.Spec.Template.Spec.InitContainers {
			names = append(names, c.Name)
		}
		return names
	}
	if got := inits(gatewayDeployment(tmpl(), "b", "tenant", nil, owner, podFacts{localRanges: v4})); !slices.Equal(got, []string{"user-init"}) {
		t.Errorf("IPv4 cluster: init containers %v, want only the template's", got)
	}
	d := gatewayDeployment(tmpl(), "b", "tenant", nil, owner, podFacts{localRanges: dual})
	if got := inits(d); !slices.Equal(got, []string{IPv6ForwardingContainer, "user-init"}) {
		t.Fatalf("dual-stack cluster: init containers %v, want %s first", got, IPv6ForwardingContainer)
	}
	c := d.Spec.Template.Spec.InitContainers[0]
	if c.Image != "registry.example/peerlink-agent:v1" || !slices.Equal(c.Args, []string{"ipv6-forwarding"}) ||
		c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("init container %+v, want the gateway's image running ipv6-forwarding, privileged", c)
	}
	again := gatewayDeployment(tmpl(), "b", "tenant", nil, owner, podFacts{localRanges: dual})
	if !equality.Semantic.DeepEqual(again, d) {
		t.Error("two renders of the same gateway differ")
	}
	withSysctl := tmpl()
	withSysctl.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv6.conf.all.forwarding", Value: "1"}}}
	if got := inits(gatewayDeployment(withSysctl, "b", "tenant", nil, owner, podFacts{localRanges: dual})); !slices.Equal(got, []string{"user-init"}) {
		t.Errorf("template with the sysctl: init containers %v, want only the template's", got)
	}
}

// TestGatewayServiceLimitsEnv: the gateway pod is told the limits of what
// the peer may export only when they are not the defaults, so that a
// default install renders the pod as before, and told them as the gateway
// reads them back.
func TestGatewayServiceLimitsEnv(t *testing.T) {
	tmpl := netv1beta1.DeploymentTemplate{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "gateway", Image: "registry.example/peerlink-agent:v1"}}}}}}
	owner := metav1.OwnerReference{APIVersion: "networking.liqo.io/v1beta1", Kind: "WgGatewayServer", Name: "b", UID: "u"}
	limitsEnv := func(l mcs.Limits) (string, bool) {
		d := gatewayDeployment(tmpl, "b", "tenant", nil, owner, podFacts{localRanges: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, serviceLimits: l})
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == netv1beta1.ServiceLimitsEnv {
				return e.Value, true
			}
		}
		return "", false
	}
	for _, l := range []mcs.Limits{{}, mcs.DefaultLimits, {Services: mcs.DefaultLimits.Services}} {
		if v, ok := limitsEnv(l); ok {
			t.Errorf("limits %+v: %s=%q, want no variable", l, netv1beta1.ServiceLimitsEnv, v)
		}
	}
	raised := mcs.Limits{TotalEndpoints: 100_000, DocumentBytes: 16 << 20}
	v, ok := limitsEnv(raised)
	if !ok {
		t.Fatalf("limits %+v: no %s", raised, netv1beta1.ServiceLimitsEnv)
	}
	if got, err := mcs.ParseLimits(v); err != nil || got != raised.WithDefaults() {
		t.Errorf("%s=%q reads back as %+v (%v), want %+v", netv1beta1.ServiceLimitsEnv, v, got, err, raised.WithDefaults())
	}
}
