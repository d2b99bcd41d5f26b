package reconciler

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
	var gw netv1beta1.GatewayServer
	if err := r.Client.Get(ctx, req.NamespacedName, &gw); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !gw.DeletionTimestamp.IsZero() {
		// The garbage collector removes what the gateway owns.
		return ctrl.Result{}, nil
	}
	before := gw.DeepCopy()
	o, err := conclude(r.reconcile(ctx, &gw))
	setKstatus(&gw.Status.CommonStatus, gw.Generation, o)
	status := func(g *netv1beta1.GatewayServer) any { return g.Status }
	if perr := patchStatus(ctx, r.Client, before, &gw, status); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return ctrl.Result{}, err
}

// reconcile checks the peer, renders the template, applies the result and
// copies its status.
func (r *GatewayServerReconciler) reconcile(ctx context.Context, gw *netv1beta1.GatewayServer) (outcome, error) {
	id, err := gatewayRemoteClusterID(gw, r.Facts.ClusterID)
	if err == nil {
		err = checkUniqueGateway(ctx, r.Client, peerGateway{"GatewayServer", gw}, id)
	}
	if err != nil {
		// A gateway that cannot tell its peer, or whose peer has an older
		// gateway already, must not run a tunnel.
		if derr := deleteRendered(ctx, r.Client, gw.Status.ServerRef, gw); derr != nil {
			return outcome{}, derr
		}
		gw.Status.ServerRef = nil
		gw.Status.Endpoint = nil
		gw.Status.SecretRef = nil
		gw.Status.PublicKey = nil
		gw.Status.InternalEndpoint = nil
		return outcome{}, err
	}
	ref := templates.ServerTemplateRef(&gw.Spec, r.Facts.Namespace)
	tmpl, err := fetchTemplate(ctx, r.Client, ref, "spec.serverTemplateRef", r.Facts.Namespace, gw.Namespace)
	if err != nil {
		return outcome{}, err
	}
	data := templates.DataForServer(gw, string(gw.UID), id, templates.KeySecretName(gw.Name, gw.Spec.SecretRef))
	obj, err := templates.RenderServer(tmpl, gw, data)
	if err != nil {
		return outcome{}, stall(ReasonInvalidTemplate, "spec.serverTemplateRef: %v", err)
	}
	if err := checkRendered(obj, "spec.serverTemplateRef", templates.RenderedKind(true), r.Facts.AllowedTemplateKinds); err != nil {
		return outcome{}, err
	}
	owner := *metav1.NewControllerRef(gw, netv1beta1.GroupVersion.WithKind("GatewayServer"))
	if err := applyRendered(ctx, r.Client, r.APIReader, obj, owner, id); err != nil {
		return outcome{}, err
	}
	if !isObject(gw.Status.ServerRef, obj) {
		if err := deleteRendered(ctx, r.Client, gw.Status.ServerRef, gw); err != nil {
			return outcome{}, err
		}
	}
	gw.Status.ServerRef = objectRef(obj)

	s, err := renderedStatus(obj)
	if err != nil {
		return outcome{}, err
	}
	gw.Status.Endpoint = s.Endpoint
	gw.Status.SecretRef = s.SecretRef
	gw.Status.PublicKey = s.PublicKey
	gw.Status.InternalEndpoint = s.InternalEndpoint
	return renderedOutcome(obj, s), nil
}

// SetupWithManager registers the reconciler with mgr. Besides GatewayServers
// and the WgGatewayServers they own, it watches the template kinds, to
// render again when a template changes, and the gateways of both kinds, so
// that when one of two gateways for a peer goes the other takes over.
func (r *GatewayServerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&netv1beta1.GatewayServer{}).
		Owns(&netv1beta1.WgGatewayServer{}).
		Watches(&netv1beta1.WgGatewayServerTemplate{}, handler.EnqueueRequestsFromMapFunc(r.forTemplate(templates.ServerTemplateKind))).
		Watches(&netv1beta1.WgGatewayClientTemplate{}, handler.EnqueueRequestsFromMapFunc(r.forTemplate(templates.ClientTemplateKind))).
		Watches(&netv1beta1.GatewayServer{}, handler.EnqueueRequestsFromMapFunc(samePeerMapper(r.Client, "GatewayServer"))).
		Watches(&netv1beta1.GatewayClient{}, handler.EnqueueRequestsFromMapFunc(samePeerMapper(r.Client, "GatewayServer"))).
		Complete(r)
}

// forTemplate maps a template of the given kind to the GatewayServers
// referencing it.
func (r *GatewayServerReconciler) forTemplate(kind string) handler.MapFunc {
	return func(ctx context.Context, t client.Object) []reconcile.Request {
		var list netv1beta1.GatewayServerList
		if err := r.Client.List(ctx, &list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list gatewayservers for a template event", "template", client.ObjectKeyFromObject(t))
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			ref := templates.ServerTemplateRef(&list.Items[i].Spec, r.Facts.Namespace)
			if ref.APIVersion == netv1beta1.GroupVersion.String() && ref.Kind == kind &&
				ref.Namespace == t.GetNamespace() && ref.Name == t.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return reqs
	}
}
