package reconciler

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// WgGatewayClientReconciler runs the gateway of a WgGatewayClient: its
// ServiceAccount and RBAC, key Secret and Deployment, all named gw-<name>
// and owned by the WgGatewayClient, and reports in its status the key
// Secret and which pod carries traffic.
type WgGatewayClientReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	// Defaults to the manager's client.
	Client client.Client
	// Facts are this cluster's own ranges, which the gateway pod learns to
	// filter what comes out of the tunnel.
	Facts ClusterFacts
	// APIReader reads Secrets, which are watched by metadata only and so
	// are not in the cache. Defaults to the manager's API reader.
	APIReader client.Reader

	// pods reads gateway pods; set by SetupWithManager.
	pods client.Reader
}

// Reconcile brings the children of one WgGatewayClient in line with its spec
// and records the result in its status.
func (r *WgGatewayClientReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileObject(ctx, r.Client, req.NamespacedName, &netv1beta1.WgGatewayClient{}, statusOf[*netv1beta1.WgGatewayClient]{
		common: func(o *netv1beta1.WgGatewayClient) *netv1beta1.CommonStatus { return &o.Status.CommonStatus },
		status: func(o *netv1beta1.WgGatewayClient) any { return o.Status },
	}, r.reconcile)
}

// reconcile applies the children and fills the status fields other than the
// conditions.
func (r *WgGatewayClientReconciler) reconcile(ctx context.Context, wg *netv1beta1.WgGatewayClient) (outcome, error) {
	secretRef, pub, err := applyWorkload(ctx, r.Client, r.APIReader, wgGateway{
		obj:             wg,
		owner:           *metav1.NewControllerRef(wg, netv1beta1.GroupVersion.WithKind("WgGatewayClient")),
		gatewayResource: "gatewayclients",
		localRanges:     r.Facts.LocalRanges(),
		deployment:      wg.Spec.Deployment,
		secretRef:       wg.Spec.SecretRef,
	})
	if err != nil {
		return outcome{}, err
	}
	wg.Status.SecretRef = secretRef
	wg.Status.PublicKey = pub[:]

	pod, err := activeGatewayPod(ctx, r.pods, r.APIReader, wg.Namespace, wg.Name, wg.UID)
	if err != nil {
		return outcome{}, err
	}
	wg.Status.InternalEndpoint = internalEndpoint(pod)
	if pod == nil {
		return progressing(ReasonWaitingForGatewayPod, "no running pod labelled %s=%s,%s=true",
			GatewayNameLabel, wg.Name, netv1beta1.ActiveGatewayLabel), nil
	}
	return ready(fmt.Sprintf("gateway pod %s on node %s", pod.Name, pod.Spec.NodeName)), nil
}

// SetupWithManager registers the reconciler with mgr. It watches the
// children and the key Secrets by metadata only, and the gateway pods
// through a cache of their own.
func (r *WgGatewayClientReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	b, pods, err := wgGatewayController(mgr, r.Client, &netv1beta1.WgGatewayClient{}, &netv1beta1.WgGatewayClientList{})
	if err != nil {
		return err
	}
	r.pods = pods
	return b.Complete(r)
}
