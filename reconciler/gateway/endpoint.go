package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/kube"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

// Reasons a gateway waits with.
const (
	// ReasonWaitingForGatewayPod: no gateway pod runs yet.
	ReasonWaitingForGatewayPod = "WaitingForGatewayPod"
	// ReasonWaitingForLoadBalancer: the Service has no load balancer ingress yet.
	ReasonWaitingForLoadBalancer = "WaitingForLoadBalancer"
	// ReasonWaitingForNodePort: the Service has no node port yet.
	ReasonWaitingForNodePort = "WaitingForNodePort"
	// ReasonWaitingForNodeAddress: the gateway pod's node has no address yet.
	ReasonWaitingForNodeAddress = "WaitingForNodeAddress"
	// ReasonWaitingForClusterIP: the Service has no cluster IP.
	ReasonWaitingForClusterIP = "WaitingForClusterIP"
	// ReasonInvalidService: the rendered Service cannot expose the gateway.
	ReasonInvalidService = "InvalidService"
)

// newGatewayPodCache returns a cache holding only gateway pods (those with a
// gateway-name label), added to mgr so it runs with it: caching every pod of
// the cluster to find a few gateways would cost memory for nothing.
func newGatewayPodCache(mgr ctrl.Manager) (cache.Cache, error) {
	req, err := labels.NewRequirement(netv1beta1.GatewayNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("gateway pod selector: %w", err)
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.NewSelector().Add(*req)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create gateway pod cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("add gateway pod cache to manager: %w", err)
	}
	return c, nil
}

// gatewayPodRequest maps a gateway pod to the gateway object of its label.
func gatewayPodRequest(_ context.Context, pod *corev1.Pod) []reconcile.Request {
	name := pod.Labels[netv1beta1.GatewayNameLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: name}}}
}

// activeGatewayPod returns the pod carrying the traffic of gateway name in
// namespace ns, or nil when none runs. Only a pod the gateway's own
// Deployment made counts: labels alone are not enough, since anyone who may
// create a pod in the namespace may copy them, and the active pod is where
// the Service and every node's fabric send the peer's traffic. The pod must
// be controlled by a ReplicaSet controlled by the Deployment gw-<name>, itself
// controlled by owner (the WgGateway object).
func activeGatewayPod(ctx context.Context, pods, reader client.Reader, ns, name string, owner types.UID) (*corev1.Pod, error) {
	var list corev1.PodList
	err := pods.List(ctx, &list, client.InNamespace(ns),
		client.MatchingLabels{netv1beta1.GatewayNameLabel: name, netv1beta1.ActiveGatewayLabel: "true"})
	if err != nil {
		return nil, fmt.Errorf("list pods of gateway %s/%s: %w", ns, name, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	dep, err := controlledMeta(ctx, reader, appsv1.SchemeGroupVersion.WithKind("Deployment"), ns, childName(name), owner)
	if dep == nil || err != nil {
		return nil, err
	}
	ours := list.Items[:0]
	replicaSets := map[string]bool{}
	for _, p := range list.Items {
		ref := metav1.GetControllerOfNoCopy(&p)
		if ref == nil || ref.Kind != "ReplicaSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
			continue
		}
		ok, seen := replicaSets[ref.Name]
		if !seen {
			rs, err := controlledMeta(ctx, reader, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), ns, ref.Name, dep.UID)
			if err != nil {
				return nil, err
			}
			ok = rs != nil && rs.UID == ref.UID
			replicaSets[ref.Name] = ok
		}
		if ok {
			ours = append(ours, p)
		}
	}
	return kube.ActivePod(ours), nil
}

// keepActiveLast gives pod, a gateway's active pod, the deletion cost its
// agent sets on it (kube.ActiveDeletionCost) when it lacks it, as the pods
// of an earlier release do: a rollout to this release then removes the
// former standbys first and the active pod last, and hands the tunnel
// over once. The write holds only while the pod is as read (optimistic
// lock), so an active label moved meanwhile leaves no cost on a standby;
// the pod's change brings the gateway back to be reconciled.
func keepActiveLast(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	if pod == nil || pod.Annotations[corev1.PodDeletionCost] != "" {
		return nil
	}
	patched := pod.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[corev1.PodDeletionCost] = kube.ActiveDeletionCost
	err := c.Patch(ctx, patched, client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{}))
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("set the deletion cost of active gateway pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// controlledMeta reads the metadata of object ns/name of kind gvk and returns
// it when it is controlled by owner, nil when it is missing or is not.
func controlledMeta(ctx context.Context, reader client.Reader, gvk schema.GroupVersionKind, ns, name string, owner types.UID) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	if err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get %s %s/%s: %w", gvk.Kind, ns, name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(m); ref == nil || ref.UID != owner {
		return nil, nil
	}
	return m, nil
}

// internalEndpoint is the status form of the active gateway pod, nil for none.
func internalEndpoint(pod *corev1.Pod) *netv1beta1.InternalGatewayEndpoint {
	if pod == nil {
		return nil
	}
	ip := netv1beta1.IP(pod.Status.PodIP)
	node := pod.Spec.NodeName
	return &netv1beta1.InternalGatewayEndpoint{IP: &ip, Node: &node}
}

// serviceEndpoint computes where a gateway server is reachable from outside
// its cluster, from its Service and, for a NodePort Service, the nodes of
// the gateway's pods, the active pod's first (none while no pod runs):
//   - NodePort: each node's ExternalIPs, else its InternalIPs, in that
//     order, and the node port. The node port answers on every node; a
//     client tries the next address when the first stops answering (its
//     node gone), and the other nodes of the gateway's pods are those most
//     likely up;
//   - LoadBalancer: the ingress IPs, then the ingress host names, and the port;
//   - ClusterIP: the cluster IP and the port.
//
// It returns nil and the outcome to report while something is awaited.
func serviceEndpoint(svc *corev1.Service, nodes []*corev1.Node) (*netv1beta1.EndpointStatus, *outcome.Outcome) {
	port, ok := tunnelPort(svc)
	if !ok {
		o := outcome.Stalled(ReasonInvalidService, "service %s/%s has no port", svc.Namespace, svc.Name)
		return nil, &o
	}
	ep := &netv1beta1.EndpointStatus{Port: port.Port, Protocol: &port.Protocol}
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		if port.NodePort == 0 {
			o := outcome.Progressing(ReasonWaitingForNodePort, "service %s/%s has no node port yet", svc.Namespace, svc.Name)
			return nil, &o
		}
		if len(nodes) == 0 {
			o := outcome.Progressing(ReasonWaitingForGatewayPod, "no gateway pod runs: the node port is reached through its node")
			return nil, &o
		}
		ep.Port = port.NodePort
		for _, n := range nodes {
			for _, a := range nodeAddresses(n) {
				if !slices.Contains(ep.Addresses, a) {
					ep.Addresses = append(ep.Addresses, a)
				}
			}
		}
		if len(ep.Addresses) == 0 {
			o := outcome.Progressing(ReasonWaitingForNodeAddress, "node %s has no ExternalIP or InternalIP address", nodes[0].Name)
			return nil, &o
		}
	case corev1.ServiceTypeLoadBalancer:
		var ips, hosts []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ips = append(ips, in.IP)
			}
			if in.Hostname != "" {
				hosts = append(hosts, in.Hostname)
			}
		}
		ep.Addresses = append(ips, hosts...)
		if len(ep.Addresses) == 0 {
			o := outcome.Progressing(ReasonWaitingForLoadBalancer, "service %s/%s has no load balancer ingress yet", svc.Namespace, svc.Name)
			return nil, &o
		}
	default:
		ip := svc.Spec.ClusterIP
		if ip == corev1.ClusterIPNone {
			o := outcome.Stalled(ReasonInvalidService, "service %s/%s is headless: it has no address to publish", svc.Namespace, svc.Name)
			return nil, &o
		}
		if ip == "" {
			o := outcome.Progressing(ReasonWaitingForClusterIP, "service %s/%s has no cluster IP yet", svc.Namespace, svc.Name)
			return nil, &o
		}
		ep.Addresses = []string{ip}
	}
	// Readers of the list form find the same port there.
	ep.Ports = []int32{ep.Port}
	return ep, nil
}

// tunnelPort is the Service port of the tunnel: the first UDP one, as
// WireGuard speaks UDP, else the first one.
func tunnelPort(svc *corev1.Service) (corev1.ServicePort, bool) {
	if len(svc.Spec.Ports) == 0 {
		return corev1.ServicePort{}, false
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolUDP {
			return p, true
		}
	}
	return svc.Spec.Ports[0], true
}

// nodeAddresses returns the ExternalIPs of a node, else its InternalIPs.
func nodeAddresses(node *corev1.Node) []string {
	var external, internal []string
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeExternalIP:
			external = append(external, a.Address)
		case corev1.NodeInternalIP:
			internal = append(internal, a.Address)
		}
	}
	if len(external) > 0 {
		return external
	}
	return internal
}

// describeEndpoint renders an endpoint for a condition message.
func describeEndpoint(ep *netv1beta1.EndpointStatus) string {
	return fmt.Sprintf("%s port %d", strings.Join(ep.Addresses, ","), ep.Port)
}
