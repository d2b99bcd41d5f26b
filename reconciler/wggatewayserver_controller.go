package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// WgGatewayServerReconciler runs the gateway of a WgGatewayServer: its
// ServiceAccount and RBAC, key Secret, Deployment and Service, all named
// gw-<name> and owned by the WgGatewayServer, and reports in its status the
// key Secret, where the server is reachable and which pod carries traffic.
type WgGatewayServerReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	// Defaults to the manager's client.
	Client client.Client
	// Facts are this cluster's own ranges, which the gateway pod learns to
	// filter what comes out of the tunnel.
	Facts ClusterFacts
	// APIReader reads Secrets and Nodes, which are watched by metadata only
	// and so are not in the cache. Defaults to the manager's API reader.
	APIReader client.Reader

	// pods reads gateway pods; set by SetupWithManager.
	pods client.Reader
}

// Reconcile brings the children of one WgGatewayServer in line with its spec
// and records the result in its status.
func (r *WgGatewayServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileObject(ctx, r.Client, req.NamespacedName, &netv1beta1.WgGatewayServer{}, statusOf[*netv1beta1.WgGatewayServer]{
		common: func(o *netv1beta1.WgGatewayServer) *netv1beta1.CommonStatus { return &o.Status.CommonStatus },
		status: func(o *netv1beta1.WgGatewayServer) any { return o.Status },
	}, r.reconcile)
}

// reconcile applies the children and fills the status fields other than the
// conditions.
func (r *WgGatewayServerReconciler) reconcile(ctx context.Context, wg *netv1beta1.WgGatewayServer) (outcome, error) {
	owner := *metav1.NewControllerRef(wg, netv1beta1.GroupVersion.WithKind("WgGatewayServer"))
	secretRef, pub, err := applyWorkload(ctx, r.Client, r.APIReader, wgGateway{
		obj:             wg,
		owner:           owner,
		gatewayResource: "gatewayservers",
		localRanges:     r.Facts.LocalRanges(),
		deployment:      wg.Spec.Deployment,
		secretRef:       wg.Spec.SecretRef,
	})
	if err != nil {
		return outcome{}, err
	}
	wg.Status.SecretRef = secretRef
	wg.Status.PublicKey = pub[:]

	svc := gatewayService(wg.Spec.Service, wg.Name, wg.Namespace, childLabels(wg), owner)
	if err := applyTyped(ctx, r.Client, r.APIReader, svc); err != nil {
		return outcome{}, err
	}

	pod, err := activeGatewayPod(ctx, r.pods, r.APIReader, wg.Namespace, wg.Name, wg.UID)
	if err != nil {
		return outcome{}, err
	}
	wg.Status.InternalEndpoint = internalEndpoint(pod)

	var node *corev1.Node
	if pod != nil && svc.Spec.Type == corev1.ServiceTypeNodePort {
		node = &corev1.Node{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); err != nil {
			return outcome{}, fmt.Errorf("get node %s of gateway pod %s/%s: %w", pod.Spec.NodeName, pod.Namespace, pod.Name, err)
		}
	}
	ep, wait := serviceEndpoint(svc, node)
	wg.Status.Endpoint = ep
	if wait != nil {
		return *wait, nil
	}
	if pod == nil {
		return progressing(ReasonWaitingForGatewayPod, "no running pod labelled %s=%s,%s=true",
			GatewayNameLabel, wg.Name, netv1beta1.ActiveGatewayLabel), nil
	}
	return ready(fmt.Sprintf("gateway pod %s on node %s, reachable at %s",
		pod.Name, pod.Spec.NodeName, describeEndpoint(ep))), nil
}

// SetupWithManager registers the reconciler with mgr. It watches the
// children by metadata only (their content is applied, never read from the
// cache), the key Secrets and the Nodes of gateway pods by metadata only,
// and the gateway pods through a cache of their own.
func (r *WgGatewayServerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	b, pods, err := wgGatewayController(mgr, r.Client, &netv1beta1.WgGatewayServer{}, &netv1beta1.WgGatewayServerList{})
	if err != nil {
		return err
	}
	r.pods = pods
	return b.
		Owns(&corev1.Service{}, builder.OnlyMetadata).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.forNode), builder.OnlyMetadata).
		Complete(r)
}

// forNode maps a Node to the WgGatewayServers whose active pod runs there,
// whose NodePort endpoint is that node's address.
func (r *WgGatewayServerReconciler) forNode(ctx context.Context, node client.Object) []reconcile.Request {
	var list netv1beta1.WgGatewayServerList
	if err := r.Client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list wggatewayservers for a node event", "node", node.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for _, wg := range list.Items {
		if ie := wg.Status.InternalEndpoint; ie != nil && ie.Node != nil && *ie.Node == node.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&wg)})
		}
	}
	return reqs
}
