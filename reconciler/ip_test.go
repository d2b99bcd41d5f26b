package reconciler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/apply"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

// TestIPReconciler runs the controller as SetupAll registers it and checks
// the addresses it gives IPs in the external CIDR 10.70.0.0/16: never the
// unknown source, never one twice, the same after a restart, freed on
// delete; and bad IPs stalled, naming the object and the field.
func TestIPReconciler(t *testing.T) {
	e := newConfEnv(t, "peerlink", "hosts")
	e.run(t)
	const ns = "hosts"

	e.createIP(t, ns, "db", "192.168.1.10", nil)
	e.waitIP(t, ns, "db", "10.70.0.1")
	// Created together, two IPs get two addresses.
	e.createIP(t, ns, "vm1", "192.168.1.11", nil)
	e.createIP(t, ns, "vm2", "192.168.1.12", nil)
	got := map[string]bool{}
	for _, name := range []string{"vm1", "vm2"} {
		got[e.waitIPAllocated(t, ns, name)] = true
	}
	if !got["10.70.0.2"] || !got["10.70.0.3"] {
		t.Errorf("vm1 and vm2 got %v, want 10.70.0.2 and 10.70.0.3", got)
	}

	// A restarted controller keeps every address.
	before := map[string]string{}
	for _, name := range []string{"db", "vm1", "vm2"} {
		ip := e.getIP(t, ns, name)
		before[name] = string(ip.Status.IP)
	}
	e.stopController(t)
	e.startController(t)
	e.createIP(t, ns, "after-restart", "192.168.1.13", nil)
	e.waitIP(t, ns, "after-restart", "10.70.0.4")
	for name, want := range before {
		if got := e.getIP(t, ns, name).Status.IP; string(got) != want {
			t.Errorf("after a restart %s has %s, want %s", name, got, want)
		}
	}

	// Deleting an IP frees its address for the next one.
	if err := e.cluster.Client.Delete(t.Context(), e.getIP(t, ns, "db")); err != nil {
		t.Fatal(err)
	}
	e.createIP(t, ns, "next", "192.168.1.14", nil)
	e.waitIP(t, ns, "next", "10.70.0.1")

	// spec.ip cannot change: a new address is a new IP.
	ip := e.getIP(t, ns, "next")
	ip.Spec.IP = "192.168.1.99"
	if err := e.cluster.Client.Update(t.Context(), ip); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("update of spec.ip: %v, want an error saying it is immutable", err)
	}

	testIPService(t, e, ns)

	for _, tc := range []struct {
		name, ip string
		ref      *corev1.ObjectReference
		reason   string
		msg      string
	}{
		{"in-pods", "10.244.3.4", nil, ipamv1alpha1.ReasonInvalidIP, "IP hosts/in-pods: spec.ip \"10.244.3.4\": in the pod CIDR 10.244.0.0/16"},
		{"in-external", "10.70.9.9", nil, ipamv1alpha1.ReasonInvalidIP, "spec.ip \"10.70.9.9\": in the external CIDR 10.70.0.0/16"},
		{"loopback", "127.0.0.1", nil, ipamv1alpha1.ReasonInvalidIP, "IP hosts/loopback: spec.ip \"127.0.0.1\""},
		{"ipv6", "fd30::5", nil, ipamv1alpha1.ReasonInvalidIP, "IP hosts/ipv6: spec.ip \"fd30::5\": not an IPv4 address"},
		{"network-ref", "192.168.1.20", &corev1.ObjectReference{Namespace: "x", Name: "net"}, ipamv1alpha1.ReasonNetworkRefUnsupported, "IP hosts/network-ref: spec.networkRef"},
	} {
		e.createIP(t, ns, tc.name, tc.ip, tc.ref)
		e.waitIPCond(t, ns, tc.name, "stalled with "+tc.reason, func(ip *ipamv1alpha1.IP) error {
			if ip.Status.IP != "" {
				return fmt.Errorf("status.ip %s, want none", ip.Status.IP)
			}
			c := meta.FindStatusCondition(ip.Status.Conditions, netv1beta1.ConditionStalled)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msg) {
				return fmt.Errorf("Stalled condition %+v, want True, %s, with %q", c, tc.reason, tc.msg)
			}
			return nil
		})
	}
}

// testIPService checks the Service and EndpointSlice of an IP's
// serviceTemplate: made without the template's selector, naming the host on
// the numeric target port, removed with the template, and never made over a
// Service someone else made.
func testIPService(t *testing.T, e *confEnv, ns string) {
	t.Helper()
	ctx := t.Context()
	tmpl := &ipamv1alpha1.ServiceTemplate{
		Metadata: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "db"},
			Ports:    []corev1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432, TargetPort: intstr.FromInt32(15432)}},
		},
	}
	ip := &ipamv1alpha1.IP{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "with-service"},
		Spec: ipamv1alpha1.IPSpec{IP: "192.168.1.30", ServiceTemplate: tmpl}}
	if err := e.cluster.Client.Create(ctx, ip); err != nil {
		t.Fatal(err)
	}
	e.waitIPAllocated(t, ns, "with-service")
	key := types.NamespacedName{Namespace: ns, Name: "with-service"}
	var svc corev1.Service
	if err := e.cluster.Client.Get(ctx, key, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Selector != nil || svc.Labels["app"] != "db" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 5432 {
		t.Errorf("Service %s: selector %v, labels %v, ports %v; want no selector, app=db, port 5432", key, svc.Spec.Selector, svc.Labels, svc.Spec.Ports)
	}
	if ref := metav1.GetControllerOf(&svc); ref == nil || ref.Kind != "IP" || ref.Name != "with-service" {
		t.Errorf("Service %s is controlled by %+v, want IP with-service", key, ref)
	}
	var slice discoveryv1.EndpointSlice
	if err := e.cluster.Client.Get(ctx, key, &slice); err != nil {
		t.Fatal(err)
	}
	if slice.Labels[discoveryv1.LabelServiceName] != "with-service" || len(slice.Endpoints) != 1 ||
		!slices.Equal(slice.Endpoints[0].Addresses, []string{"192.168.1.30"}) || len(slice.Ports) != 1 || *slice.Ports[0].Port != 15432 {
		t.Errorf("EndpointSlice %s: labels %v, endpoints %+v, ports %+v; want the service's, 192.168.1.30, port 15432", key, slice.Labels, slice.Endpoints, slice.Ports)
	}

	// Without the template, both go.
	ip = e.getIP(t, ns, "with-service")
	ip.Spec.ServiceTemplate = nil
	if err := e.cluster.Client.Update(ctx, ip); err != nil {
		t.Fatal(err)
	}
	e.waitIPCond(t, ns, "with-service", "without its Service", func(*ipamv1alpha1.IP) error {
		for _, obj := range []client.Object{&corev1.Service{}, &discoveryv1.EndpointSlice{}} {
			if err := e.cluster.Client.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s: %v, want not found", obj, key, err)
			}
		}
		return nil
	})

	// A Service someone else made is not taken over.
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := e.cluster.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	ip = &ipamv1alpha1.IP{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: ipamv1alpha1.IPSpec{IP: "192.168.1.31", ServiceTemplate: tmpl}}
	if err := e.cluster.Client.Create(ctx, ip); err != nil {
		t.Fatal(err)
	}
	e.waitIPCond(t, ns, "taken", "stalled on the foreign Service", func(ip *ipamv1alpha1.IP) error {
		c := meta.FindStatusCondition(ip.Status.Conditions, netv1beta1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != apply.ReasonForeignObject || !strings.Contains(c.Message, "Service "+ns+"/taken") {
			return fmt.Errorf("Stalled condition %+v, want True, %s, naming the Service", c, apply.ReasonForeignObject)
		}
		return nil
	})
}

func (e *confEnv) createIP(t *testing.T, ns, name, local string, ref *corev1.ObjectReference) {
	t.Helper()
	ip := &ipamv1alpha1.IP{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: ipamv1alpha1.IPSpec{IP: netv1beta1.IP(local), NetworkRef: ref}}
	if err := e.cluster.Client.Create(t.Context(), ip); err != nil {
		t.Fatalf("create IP %s/%s: %v", ns, name, err)
	}
}

func (e *confEnv) getIP(t *testing.T, ns, name string) *ipamv1alpha1.IP {
	t.Helper()
	var ip ipamv1alpha1.IP
	if err := e.cluster.Client.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, &ip); err != nil {
		t.Fatal(err)
	}
	return &ip
}

// waitIPCond polls IP ns/name until check accepts it, for its current
// generation.
func (e *confEnv) waitIPCond(t *testing.T, ns, name, what string, check func(*ipamv1alpha1.IP) error) *ipamv1alpha1.IP {
	t.Helper()
	return waitStatus(t, e, &ipamv1alpha1.IP{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		func(ip *ipamv1alpha1.IP) *netv1beta1.CommonStatus { return &ip.Status.CommonStatus }, what, check)
}

// waitIPAllocated waits until IP ns/name is Ready with an address of the
// external CIDR, and returns it.
func (e *confEnv) waitIPAllocated(t *testing.T, ns, name string) string {
	t.Helper()
	ip := e.waitIPCond(t, ns, name, "ready", func(ip *ipamv1alpha1.IP) error {
		c := meta.FindStatusCondition(ip.Status.Conditions, netv1beta1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != outcome.ReasonReconciled {
			return fmt.Errorf("Ready condition %+v", c)
		}
		if ip.Status.IP == "" || ip.Status.CIDR != "10.70.0.0/16" {
			return fmt.Errorf("status.ip %q, status.cidr %q, want an address of 10.70.0.0/16", ip.Status.IP, ip.Status.CIDR)
		}
		return nil
	})
	return string(ip.Status.IP)
}

// waitIP waits until IP ns/name is Ready with address want.
func (e *confEnv) waitIP(t *testing.T, ns, name, want string) {
	t.Helper()
	if got := e.waitIPAllocated(t, ns, name); got != want {
		t.Fatalf("IP %s/%s got %s, want %s", ns, name, got, want)
	}
}
