package reconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/templates"
)

// GatewayClientReconciler renders the template a GatewayClient references
// into the object running its gateway (a WgGatewayClient with the default
// templates), owned by the GatewayClient, and reports in the GatewayClient's
// status what that object reports: its key Secret and its active pod.
//
// The gateway is rendered, and its keys made, before the server's endpoint
// is known: an admin can then send the public key to the peer in the first
// message, and the peer answers with the endpoint.
type GatewayClientReconciler struct {
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

// Reconcile renders and applies the gateway of one GatewayClient and records
// the result in its status.
func (r *GatewayClientReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcileObject(ctx, r.Client, req.NamespacedName, &netv1beta1.GatewayClient{}, statusOf[*netv1beta1.GatewayClient]{
		common: func(o *netv1beta1.GatewayClient) *netv1beta1.CommonStatus { return &o.Status.CommonStatus },
		status: func(o *netv1beta1.GatewayClient) any { return o.Status },
	}, r.reconcile)
}

// reconcile checks the peer, renders the template, applies the result and
// copies its status.
func (r *GatewayClientReconciler) reconcile(ctx context.Context, gw *netv1beta1.GatewayClient) (outcome, error) {
	flow := renderFlow{
		gw: gw, kind: "GatewayClient",
		field:       "spec.clientTemplateRef",
		templateRef: templates.ClientTemplateRef(&gw.Spec, r.Facts.Namespace),
		render: func(tmpl *unstructured.Unstructured, id string) (*unstructured.Unstructured, error) {
			return templates.Render(tmpl, templates.DataForClient(gw, string(gw.UID), id, templates.KeySecretName(gw.Name, gw.Spec.SecretRef)))
		},
		rendered: &gw.Status.ClientRef,
	}
	obj, s, err := flow.run(ctx, r.Client, r.APIReader, r.Facts, func() {
		gw.Status.SecretRef, gw.Status.PublicKey, gw.Status.InternalEndpoint = nil, nil, nil
	})
	if err != nil {
		return outcome{}, err
	}
	gw.Status.SecretRef, gw.Status.PublicKey, gw.Status.InternalEndpoint = s.SecretRef, s.PublicKey, s.InternalEndpoint
	o := renderedOutcome(obj, s)
	if o.state != stateStalled && (len(gw.Spec.Endpoint.Addresses) == 0 || gw.Spec.Endpoint.Port == 0) {
		return progressing(netv1beta1.ReasonWaitingForEndpoint,
			"spec.endpoint.addresses and spec.endpoint.port: the address and port of the peer's gateway server are not known yet"), nil
	}
	return o, nil
}

// SetupWithManager registers the reconciler with mgr (see setupGateway).
func (r *GatewayClientReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return setupGateway(mgr, r, r.Client, r.Facts.Namespace, &netv1beta1.GatewayClient{}, &netv1beta1.WgGatewayClient{})
}
