package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

// testWgServerMove moves the node port of a server of several replicas
// (its Service selects no pod; the active replica writes its
// EndpointSlice): the Service answers at the new port and, for the
// grace, at the previous one, the EndpointSlice carries both, and the
// status publishes the new one.
func testWgServerMove(t *testing.T, e *gatewayEnv) {
	ctx := t.Context()
	c := wgServerCase(e)
	ns := e.namespace(t, "wg-server-move")
	svcTemplate := gatewayServiceTemplate("peer", corev1.ServiceTypeNodePort, 30445)
	svcTemplate.Spec.Selector = nil
	wg := c.new(peerMeta(ns, "peer", "remote-1"), wgSpec("peer", svcTemplate))
	e.create(t, wg)
	node := "node-" + ns
	e.createNode(t, node, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.20"})
	pod := e.runGatewayPod(t, ns, "peer", node, "10.244.0.8")
	e.create(t, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw-peer", Labels: map[string]string{
			discoveryv1.LabelServiceName: "gw-peer", discoveryv1.LabelManagedBy: netv1beta1.GatewayEndpointSliceManager}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.8"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("wireguard"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(netv1beta1.DefaultGatewayPort))}},
	})
	c.waitReady(t, e, ns, "peer", metav1.ConditionTrue, outcome.ReasonReconciled, func(wg *netv1beta1.WgGatewayServer) error {
		return endpointIs(wg.Status.Endpoint, 30445, "192.0.2.20")
	})
	var svc corev1.Service
	if err := e.get(ctx, ns, "gw-peer", &svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Annotations[PreviousPortAnnotation] != "" {
		t.Fatalf("before any move: ports %+v, annotations %v", svc.Spec.Ports, svc.Annotations)
	}

	if err := e.get(ctx, ns, "peer", wg); err != nil {
		t.Fatal(err)
	}
	wg.Spec.Service.Spec.Ports[0].NodePort = 30446
	if err := e.c.Update(ctx, wg); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.waitReady(t, e, ns, "peer", metav1.ConditionTrue, outcome.ReasonReconciled, func(wg *netv1beta1.WgGatewayServer) error {
		return endpointIs(wg.Status.Endpoint, 30446, "192.0.2.20")
	})
	eventually(t, "the Service at both ports, the EndpointSlice with both", func(ctx context.Context) error {
		if err := e.get(ctx, ns, "gw-peer", &svc); err != nil {
			return err
		}
		if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].NodePort != 30446 || svc.Spec.Ports[1].Name != previousPortName || svc.Spec.Ports[1].NodePort != 30445 ||
			svc.Spec.Ports[1].TargetPort != intstr.FromInt32(netv1beta1.DefaultGatewayPort) {
			return fmt.Errorf("ports %+v", svc.Spec.Ports)
		}
		port, until, ok := parsePreviousPort(svc.Annotations[PreviousPortAnnotation])
		if !ok || port != 30445 || until.Before(start.Add(moveGrace-time.Minute)) || until.After(time.Now().Add(moveGrace)) {
			return fmt.Errorf("annotation %s: %q", PreviousPortAnnotation, svc.Annotations[PreviousPortAnnotation])
		}
		var slice discoveryv1.EndpointSlice
		if err := e.get(ctx, ns, "gw-peer", &slice); err != nil {
			return err
		}
		var names []string
		for _, p := range slice.Ports {
			if *p.Port != netv1beta1.DefaultGatewayPort {
				return fmt.Errorf("slice port %+v: want the replica's listen port", p)
			}
			names = append(names, *p.Name)
		}
		if strings.Join(names, ",") != "wireguard,"+previousPortName {
			return fmt.Errorf("slice ports %v", names)
		}
		return nil
	})
	// Another reconcile within the grace keeps the previous port.
	e.reconcileAgain(t, c.r, ns, "peer")
	if err := e.get(ctx, ns, "gw-peer", &svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 2 {
		t.Errorf("the previous port went within its grace: %+v", svc.Spec.Ports)
	}
}

// TestKeepPreviousPort checks which moves keep the previous port, and for
// how long.
func TestKeepPreviousPort(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	service := func(typ corev1.ServiceType, port, nodePort int32, annotation string) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{
			Name: "wireguard", Protocol: corev1.ProtocolUDP, Port: port, NodePort: nodePort, TargetPort: intstr.FromInt32(51840)}}}}
		if annotation != "" {
			s.Annotations = map[string]string{PreviousPortAnnotation: annotation}
		}
		return s
	}
	within := "30445/" + now.Add(time.Minute).Format(time.RFC3339)
	over := "30445/" + now.Add(-time.Second).Format(time.RFC3339)
	for _, tc := range []struct {
		name      string
		svc, live *corev1.Service
		keep      time.Duration
		prev      int32
	}{
		{"no Service yet", service(corev1.ServiceTypeNodePort, 51840, 30446, ""), nil, 0, 0},
		{"node port moved", service(corev1.ServiceTypeNodePort, 51840, 30446, ""), service(corev1.ServiceTypeNodePort, 51840, 30445, ""), moveGrace, 30445},
		{"node port unchanged", service(corev1.ServiceTypeNodePort, 51840, 30445, ""), service(corev1.ServiceTypeNodePort, 51840, 30445, ""), 0, 0},
		{"node port allocated", service(corev1.ServiceTypeNodePort, 51840, 0, ""), service(corev1.ServiceTypeNodePort, 51840, 30445, ""), 0, 0},
		{"within the grace", service(corev1.ServiceTypeNodePort, 51840, 30446, ""), service(corev1.ServiceTypeNodePort, 51840, 30446, within), time.Minute, 30445},
		{"past the grace", service(corev1.ServiceTypeNodePort, 51840, 30446, ""), service(corev1.ServiceTypeNodePort, 51840, 30446, over), 0, 0},
		{"moved back", service(corev1.ServiceTypeNodePort, 51840, 30445, ""), service(corev1.ServiceTypeNodePort, 51840, 30446, within), moveGrace, 30446},
		{"type changed", service(corev1.ServiceTypeLoadBalancer, 51840, 0, ""), service(corev1.ServiceTypeNodePort, 51840, 30445, ""), 0, 0},
		{"load balancer port moved", service(corev1.ServiceTypeLoadBalancer, 51841, 0, ""), service(corev1.ServiceTypeLoadBalancer, 51840, 30445, ""), moveGrace, 51840},
		{"a bad annotation", service(corev1.ServiceTypeNodePort, 51840, 30446, ""), service(corev1.ServiceTypeNodePort, 51840, 30446, "30445"), 0, 0},
	} {
		svc := tc.svc.DeepCopy()
		keep := keepPreviousPort(svc, tc.live, now)
		if keep != tc.keep {
			t.Errorf("%s: kept for %v, want %v", tc.name, keep, tc.keep)
		}
		if tc.prev == 0 {
			if len(svc.Spec.Ports) != 1 || svc.Annotations[PreviousPortAnnotation] != "" {
				t.Errorf("%s: ports %+v, annotations %v; want none added", tc.name, svc.Spec.Ports, svc.Annotations)
			}
			continue
		}
		if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Port != tc.prev || (svc.Spec.Type == corev1.ServiceTypeNodePort) != (svc.Spec.Ports[1].NodePort == tc.prev) ||
			svc.Spec.Ports[1].TargetPort != svc.Spec.Ports[0].TargetPort {
			t.Errorf("%s: ports %+v, want the previous port %d", tc.name, svc.Spec.Ports, tc.prev)
		}
		if p, until, ok := parsePreviousPort(svc.Annotations[PreviousPortAnnotation]); !ok || p != tc.prev || !until.Equal(now.Add(tc.keep)) {
			t.Errorf("%s: annotation %q", tc.name, svc.Annotations[PreviousPortAnnotation])
		}
	}
}
