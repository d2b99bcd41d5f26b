package gateway

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// IPReadersBinding names the ClusterRoleBinding, installed empty, whose
// subjects the controller keeps to the ServiceAccounts of every gateway:
// it binds the ClusterRole of the same name, which reads the IP objects of
// every namespace (the hosts this cluster remaps, which a gateway
// translates whichever namespace holds them). A Role cannot grant that, and
// one binding the controller rewrites from the list of gateways leaves
// nothing behind when a gateway goes, without a finalizer.
const IPReadersBinding = "peerlink-gateway-ips"

// ipReaders keeps the subjects of IPReadersBinding.
type ipReaders struct {
	client client.Client
	reader client.Reader
}

// Reconcile writes the binding's subjects from the gateways in the cache,
// whichever gateway the request names.
func (r *ipReaders) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	var servers netv1beta1.WgGatewayServerList
	var clients netv1beta1.WgGatewayClientList
	if err := r.client.List(ctx, &servers); err != nil {
		return ctrl.Result{}, fmt.Errorf("list WgGatewayServers: %w", err)
	}
	if err := r.client.List(ctx, &clients); err != nil {
		return ctrl.Result{}, fmt.Errorf("list WgGatewayClients: %w", err)
	}
	var subjects []rbacv1.Subject
	add := func(o client.Object) {
		if o.GetDeletionTimestamp().IsZero() {
			subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: childName(o.GetName()), Namespace: o.GetNamespace()})
		}
	}
	for i := range servers.Items {
		add(&servers.Items[i])
	}
	for i := range clients.Items {
		add(&clients.Items[i])
	}
	slices.SortFunc(subjects, func(a, b rbacv1.Subject) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	subjects = slices.Compact(subjects)
	var crb rbacv1.ClusterRoleBinding
	if err := r.reader.Get(ctx, types.NamespacedName{Name: IPReadersBinding}, &crb); err != nil {
		return ctrl.Result{}, fmt.Errorf("get ClusterRoleBinding %s (installed with peerlink): %w", IPReadersBinding, err)
	}
	if equality.Semantic.DeepEqual(crb.Subjects, subjects) {
		return ctrl.Result{}, nil
	}
	crb.Subjects = subjects
	if err := r.client.Update(ctx, &crb); err != nil {
		return ctrl.Result{}, fmt.Errorf("update subjects of ClusterRoleBinding %s: %w", IPReadersBinding, err)
	}
	return ctrl.Result{}, nil
}

// setupIPReaders registers the controller that keeps IPReadersBinding: every
// event of a WgGatewayServer or WgGatewayClient brings one rewrite of it.
func setupIPReaders(mgr ctrl.Manager) error {
	r := &ipReaders{client: mgr.GetClient(), reader: mgr.GetAPIReader()}
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: IPReadersBinding}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("gateway-ip-readers").
		Watches(&netv1beta1.WgGatewayServer{}, one).
		Watches(&netv1beta1.WgGatewayClient{}, one).
		Complete(r)
}
