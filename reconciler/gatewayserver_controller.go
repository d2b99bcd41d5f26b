package reconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/templates"
)

// GatewayServerReconciler renders the template a GatewayServer references
// into the object running its gateway (a WgGatewayServer with the default
// templates), owned by the GatewayServer, and reports in the GatewayServer's
// status what that object reports: where the server is reachable, its key
// Secret and its active pod.
type GatewayServerReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	// Defaults to the manager's client.
	Client client.Client
	// APIReader reads the metadata of an object before it is applied, to
	// make sure it is not someone else's. Defaults to the manager's API
	// reader.
	APIReader client.Reader
	// Facts are this cluster's own: its ID, which no gateway may name as
	// its peer, and its namespace, which holds the default templates.
	Facts ClusterFacts
}

// Reconcile renders and applies the gateway of one GatewayServer and records
// the result in its status.
func (r *GatewayServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileObject(ctx, r.Client, req.NamespacedName, &netv1beta1.GatewayServer{}, statusOf[*netv1beta1.GatewayServer]{
		common: func(o *netv1beta1.GatewayServer) *netv1beta1.CommonStatus { return &o.Status.CommonStatus },
		status: func(o *netv1beta1.GatewayServer) any { return o.Status },
	}, r.reconcile)
}

// reconcile checks the peer, renders the template, applies the result and
// copies its status.
func (r *GatewayServerReconciler) reconcile(ctx context.Context, gw *netv1beta1.GatewayServer) (outcome, error) {
	flow := renderFlow{
		gw: gw, kind: "GatewayServer", server: true,
		field:       "spec.serverTemplateRef",
		templateRef: templates.ServerTemplateRef(&gw.Spec, r.Facts.Namespace),
		render: func(tmpl *unstructured.Unstructured, id string) (*unstructured.Unstructured, error) {
			return templates.RenderServer(tmpl, gw, templates.DataForServer(gw, string(gw.UID), id, templates.KeySecretName(gw.Name, gw.Spec.SecretRef)))
		},
		rendered: &gw.Status.ServerRef,
	}
	obj, s, err := flow.run(ctx, r.Client, r.APIReader, r.Facts, func() {
		gw.Status.Endpoint, gw.Status.SecretRef, gw.Status.PublicKey, gw.Status.InternalEndpoint = nil, nil, nil, nil
	})
	if err != nil {
		return outcome{}, err
	}
	gw.Status.Endpoint, gw.Status.SecretRef, gw.Status.PublicKey, gw.Status.InternalEndpoint = s.Endpoint, s.SecretRef, s.PublicKey, s.InternalEndpoint
	return renderedOutcome(obj, s), nil
}

// SetupWithManager registers the reconciler with mgr (see setupGateway).
func (r *GatewayServerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return setupGateway(mgr, r, r.Client, r.Facts.Namespace, &netv1beta1.GatewayServer{}, &netv1beta1.WgGatewayServer{})
}
