package gateway

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/reconciler/outcome"
)

// objectKind is one of the gateway kinds (GatewayServer, GatewayClient,
// WgGatewayServer, WgGatewayClient) as the code they share needs it.
type objectKind[T client.Object] struct {
	// name is the kind, as the kind field of an object says it.
	name      string
	newObject func() T
	newList   func() client.ObjectList
	// status points into an object of the kind at its status.
	status func(T) statusFields
}

// kindOf returns kind name, whose objects are of Go type O, listed as L,
// with status pointing into their status.
func kindOf[O, L any, T interface {
	*O
	client.Object
}, PL interface {
	*L
	client.ObjectList
}](name string, status func(T) statusFields) objectKind[T] {
	return objectKind[T]{
		name:      name,
		newObject: func() T { return new(O) },
		newList:   func() client.ObjectList { return PL(new(L)) },
		status:    status,
	}
}

// statusFields point into the status of an object of a gateway kind. Every
// kind reports its kstatus conditions, its key Secret with the public key it
// holds, and its active pod; a server kind where it is reachable; a Gateway
// kind the object rendered for it. A field the kind lacks is nil.
type statusFields struct {
	// all is the whole status, compared to tell whether to write.
	all      any
	common   *netv1beta1.CommonStatus
	gateway  *netv1beta1.GatewayStatus
	endpoint **netv1beta1.EndpointStatus
	rendered **corev1.ObjectReference
	rotation **netv1beta1.KeyRotationStatus
}

// report copies into f what s, the status of the object rendered for a
// gateway, reports.
func (f statusFields) report(s netv1beta1.WgGatewayServerStatus) {
	*f.gateway = s.GatewayStatus
	if f.endpoint != nil {
		*f.endpoint = s.Endpoint
	}
}

// list returns the objects of the kind that c lists with opts.
func (k objectKind[T]) list(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]T, error) {
	l := k.newList()
	if err := c.List(ctx, l, opts...); err != nil {
		return nil, fmt.Errorf("list %s objects: %w", k.name, err)
	}
	var objs []T
	err := meta.EachListItem(l, func(o runtime.Object) error {
		objs = append(objs, o.(T))
		return nil
	})
	return objs, err
}

// requestsFor returns the map function of a watch: it brings back the
// objects of the kind that match accepts for the object of the event.
func (k objectKind[T]) requestsFor(c client.Reader, match func(event client.Object, obj T) bool) handler.MapFunc {
	return func(ctx context.Context, event client.Object) []reconcile.Request {
		objs, err := k.list(ctx, c)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list the objects an event brings back", "event", client.ObjectKeyFromObject(event))
			return nil
		}
		var reqs []reconcile.Request
		for _, o := range objs {
			if match(event, o) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
			}
		}
		return reqs
	}
}

// flow is the reconcile flow of the kind's objects.
func (k objectKind[T]) flow() outcome.Flow[T] {
	return outcome.Flow[T]{
		New:        k.newObject,
		Conditions: func(o T) *netv1beta1.CommonStatus { return k.status(o).common },
		Status:     func(o T) any { return k.status(o).all },
	}
}
