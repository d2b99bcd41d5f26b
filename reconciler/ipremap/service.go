package ipremap

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	"github.com/peerlink/peerlink/reconciler/apply"
)

// syncService makes the Service and EndpointSlice of spec.serviceTemplate,
// both named as the IP and controlled by it, or removes those it made once
// the template is gone. The Service selects no pods: its EndpointSlice
// names the host, so that this cluster's pods reach it by a name.
func (r *Reconciler) syncService(ctx context.Context, ip *ipamv1alpha1.IP) error {
	owner := *metav1.NewControllerRef(ip, ipamv1alpha1.GroupVersion.WithKind("IP"))
	if ip.Spec.ServiceTemplate == nil {
		for _, obj := range []client.Object{&corev1.Service{}, &discoveryv1.EndpointSlice{}} {
			if err := r.removeOwned(ctx, obj, types.NamespacedName{Namespace: ip.Namespace, Name: ip.Name}, owner); err != nil {
				return err
			}
		}
		return nil
	}
	for _, obj := range []client.Object{service(ip, owner), endpointSlice(ip, owner)} {
		if err := apply.Typed(ctx, r.Client, r.Reader, obj); err != nil {
			return err
		}
	}
	return nil
}

// service is the Service of ip's template, without a selector.
func service(ip *ipamv1alpha1.IP, owner metav1.OwnerReference) *corev1.Service {
	t := ip.Spec.ServiceTemplate
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ip.Namespace, Name: ip.Name,
			Labels: t.Metadata.Labels, Annotations: t.Metadata.Annotations,
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	svc.Spec.Selector = nil
	return svc
}

// endpointSlice names the host of ip as the one endpoint of its Service,
// on each port of the template: its numeric target port, else its port (a
// named target port names a pod's port, and the host is no pod).
func endpointSlice(ip *ipamv1alpha1.IP, owner metav1.OwnerReference) *discoveryv1.EndpointSlice {
	var ports []discoveryv1.EndpointPort
	for _, p := range ip.Spec.ServiceTemplate.Spec.Ports {
		port := p.Port
		if n := p.TargetPort.IntValue(); n > 0 {
			port = int32(n)
		}
		ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(port), AppProtocol: p.AppProtocol})
	}
	return &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ip.Namespace, Name: ip.Name,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: ip.Name,
				discoveryv1.LabelManagedBy:   ipamv1alpha1.EndpointSliceManager,
			},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{string(ip.Spec.IP)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: ports,
	}
}

// removeOwned deletes the object key of obj's kind when owner controls it:
// one of the same name that someone else made stays.
func (r *Reconciler) removeOwned(ctx context.Context, obj client.Object, key types.NamespacedName, owner metav1.OwnerReference) error {
	if err := r.Reader.Get(ctx, key, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ref := metav1.GetControllerOfNoCopy(obj); ref == nil || ref.UID != owner.UID {
		return nil
	}
	if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %T %s: %w", obj, key, err)
	}
	return nil
}
