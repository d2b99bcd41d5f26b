package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

func TestServiceEndpoint(t *testing.T) {
	udp := corev1.ProtocolUDP
	ports := []corev1.ServicePort{
		{Name: "metrics", Port: 8082, Protocol: corev1.ProtocolTCP, NodePort: 30001},
		{Name: "wireguard", Port: 51840, Protocol: corev1.ProtocolUDP, NodePort: 30444},
	}
	service := func(typ corev1.ServiceType, clusterIP string, ingress ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw-peer"},
			Spec:       corev1.ServiceSpec{Type: typ, ClusterIP: clusterIP, Ports: ports},
			Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ingress}},
		}
	}
	node := func(addrs ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: addrs}}
	}
	internal := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}
	external := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.1"}
	hostname := corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"}

	for _, tc := range []struct {
		name       string
		svc        *corev1.Service
		nodes      []*corev1.Node
		want       *netv1beta1.EndpointStatus
		waitReason string
	}{
		{
			name:  "node port, internal address only",
			svc:   service(corev1.ServiceTypeNodePort, "10.96.0.10"),
			nodes: []*corev1.Node{node(hostname, internal)},
			want:  &netv1beta1.EndpointStatus{Addresses: []string{"192.0.2.1"}, Port: 30444, Ports: []int32{30444}, Protocol: &udp},
		},
		{
			name:  "node port, external address wins",
			svc:   service(corev1.ServiceTypeNodePort, "10.96.0.10"),
			nodes: []*corev1.Node{node(internal, external)},
			want:  &netv1beta1.EndpointStatus{Addresses: []string{"198.51.100.1"}, Port: 30444, Ports: []int32{30444}, Protocol: &udp},
		},
		{
			name: "node port, replicas: the active pod's node first, each address once",
			svc:  service(corev1.ServiceTypeNodePort, "10.96.0.10"),
			nodes: []*corev1.Node{
				node(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.2"}),
				node(internal), node(internal),
			},
			want: &netv1beta1.EndpointStatus{Addresses: []string{"192.0.2.2", "192.0.2.1"}, Port: 30444, Ports: []int32{30444}, Protocol: &udp},
		},
		{
			name:       "node port, no pod yet",
			svc:        service(corev1.ServiceTypeNodePort, "10.96.0.10"),
			waitReason: ReasonWaitingForGatewayPod,
		},
		{
			name:       "node port, node without address",
			svc:        service(corev1.ServiceTypeNodePort, "10.96.0.10"),
			nodes:      []*corev1.Node{node(hostname)},
			waitReason: ReasonWaitingForNodeAddress,
		},
		{
			name: "load balancer, IPs before host names",
			svc: service(corev1.ServiceTypeLoadBalancer, "10.96.0.10",
				corev1.LoadBalancerIngress{Hostname: "lb.example.org"}, corev1.LoadBalancerIngress{IP: "203.0.113.5"}),
			want: &netv1beta1.EndpointStatus{Addresses: []string{"203.0.113.5", "lb.example.org"}, Port: 51840, Ports: []int32{51840}, Protocol: &udp},
		},
		{
			name:       "load balancer, no ingress yet",
			svc:        service(corev1.ServiceTypeLoadBalancer, "10.96.0.10"),
			nodes:      []*corev1.Node{node(internal)},
			waitReason: ReasonWaitingForLoadBalancer,
		},
		{
			name: "cluster IP",
			svc:  service(corev1.ServiceTypeClusterIP, "10.96.0.10"),
			want: &netv1beta1.EndpointStatus{Addresses: []string{"10.96.0.10"}, Port: 51840, Ports: []int32{51840}, Protocol: &udp},
		},
		{
			name:       "headless",
			svc:        service(corev1.ServiceTypeClusterIP, corev1.ClusterIPNone),
			waitReason: ReasonInvalidService,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, wait := serviceEndpoint(tc.svc, tc.nodes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
			switch {
			case tc.waitReason == "" && wait != nil:
				t.Errorf("unexpected wait %+v", *wait)
			case tc.waitReason != "" && (wait == nil || wait.Reason != tc.waitReason):
				t.Errorf("wait %+v, want reason %s", wait, tc.waitReason)
			}
		})
	}
}
