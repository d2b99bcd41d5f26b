package gateway

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// PreviousPortAnnotation, on a gateway server's Service, is the port the
// server was published at before its published port moved (a new
// spec.endpoint.nodePort or port), and until when the Service keeps
// answering there: "<port>/<RFC 3339 time>". Meanwhile the server
// announces its new endpoint through the tunnel, which the client follows
// (see the gateway agent): the tunnel moves with no file exchanged and no
// packet lost. A client that was away longer than the grace finds the
// server again through a new exchange of files, as its Connection says.
const PreviousPortAnnotation = "peerlink.io/previous-port"

// moveGrace is how long a server's Service keeps its previous port.
const moveGrace = 10 * time.Minute

// previousPortName names the Service port of the previous published port.
const previousPortName = "previous"

// keepPreviousPort adds to svc, the server's Service about to be applied,
// the port live (the Service as it stands; nil for none) was published at
// when svc moves it, or when live still keeps it within its grace. It
// returns how long the previous port stays; zero when none is kept. None
// is kept when the Service changes type (its addresses change too), when
// its tunnel port has no name (a Service of several ports names each), or
// when the previous port would collide with another port of svc.
func keepPreviousPort(svc, live *corev1.Service, now time.Time) time.Duration {
	if live == nil || live.Spec.Type != svc.Spec.Type {
		return 0
	}
	port, ok := tunnelPort(svc)
	if !ok || port.Name == "" {
		return 0
	}
	published := publishedPort(svc.Spec.Type, port)
	if published == 0 {
		// An allocated node port stays as it is.
		return 0
	}
	prev, until := int32(0), time.Time{}
	if livePort, ok := tunnelPort(live); ok && publishedPort(live.Spec.Type, livePort) != 0 && publishedPort(live.Spec.Type, livePort) != published {
		prev, until = publishedPort(live.Spec.Type, livePort), now.Add(moveGrace)
	} else if p, u, ok := parsePreviousPort(live.Annotations[PreviousPortAnnotation]); ok && u.After(now) && p != published {
		prev, until = p, u
	}
	if prev == 0 {
		return 0
	}
	extra := corev1.ServicePort{Name: previousPortName, Protocol: port.Protocol, Port: prev, TargetPort: port.TargetPort}
	if svc.Spec.Type == corev1.ServiceTypeNodePort {
		extra.NodePort = prev
	}
	if slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Name == extra.Name || (p.Port == extra.Port && p.Protocol == extra.Protocol) || (extra.NodePort != 0 && p.NodePort == extra.NodePort)
	}) {
		return 0
	}
	svc.Spec.Ports = append(svc.Spec.Ports, extra)
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[PreviousPortAnnotation] = fmt.Sprintf("%d/%s", prev, until.UTC().Format(time.RFC3339))
	return until.Sub(now)
}

// publishedPort is the port a server's endpoint publishes of port, its
// Service's tunnel port: the node port of a NodePort Service (zero while
// unallocated), the port of any other.
func publishedPort(typ corev1.ServiceType, port corev1.ServicePort) int32 {
	if typ == corev1.ServiceTypeNodePort {
		return port.NodePort
	}
	return port.Port
}

// parsePreviousPort reads a PreviousPortAnnotation value.
func parsePreviousPort(s string) (int32, time.Time, bool) {
	p, u, ok := strings.Cut(s, "/")
	if !ok {
		return 0, time.Time{}, false
	}
	port, err := strconv.ParseInt(p, 10, 32)
	if err != nil || port < 1 || port > 65535 {
		return 0, time.Time{}, false
	}
	until, err := time.Parse(time.RFC3339, u)
	if err != nil {
		return 0, time.Time{}, false
	}
	return int32(port), until, true
}

// liveService reads the Service svc is applied over; nil when there is
// none yet.
func liveService(ctx context.Context, r client.Reader, svc *corev1.Service) (*corev1.Service, error) {
	live := &corev1.Service{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(svc), live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return live, nil
}

// syncSlicePorts gives the EndpointSlice the active replica wrote for a
// Service without a selector (see removeStaleSlices) the Service's UDP
// ports, each at the port the replica listens on, as the replica writes
// them: a port the Service gains (its previous port) answers at once, not
// only after the next failover.
func syncSlicePorts(ctx context.Context, c client.Client, svc *corev1.Service) error {
	if len(svc.Spec.Selector) > 0 {
		return nil
	}
	slice := &discoveryv1.EndpointSlice{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(svc), slice); err != nil {
		return client.IgnoreNotFound(err)
	}
	if slice.Labels[discoveryv1.LabelManagedBy] != netv1beta1.GatewayEndpointSliceManager || len(slice.Ports) == 0 || slice.Ports[0].Port == nil {
		return nil
	}
	listen := *slice.Ports[0].Port
	var want []discoveryv1.EndpointPort
	for _, p := range svc.Spec.Ports {
		if p.Protocol == corev1.ProtocolUDP {
			want = append(want, discoveryv1.EndpointPort{Name: &p.Name, Protocol: &p.Protocol, Port: &listen})
		}
	}
	if slices.EqualFunc(slice.Ports, want, func(a, b discoveryv1.EndpointPort) bool {
		return a.Name != nil && *a.Name == *b.Name && a.Protocol != nil && *a.Protocol == *b.Protocol && a.Port != nil && *a.Port == *b.Port
	}) {
		return nil
	}
	before := slice.DeepCopy()
	slice.Ports = want
	if err := c.Patch(ctx, slice, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("set the ports of EndpointSlice %s/%s: %w", slice.Namespace, slice.Name, err)
	}
	return nil
}
