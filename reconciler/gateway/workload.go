package gateway

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/reconciler/apply"
	"github.com/peerlink/peerlink/templates"
)

// childName is the name of everything a gateway produces: gw-<gateway>.
func childName(gatewayName string) string {
	return netv1beta1.GatewayObjectPrefix + gatewayName
}

// childLabels are the labels every object made for a gateway carries: the
// remote cluster ID, copied from the object it is made from.
func childLabels(owner metav1.Object) map[string]string {
	id, ok := owner.GetLabels()[netv1beta1.RemoteClusterIDLabel]
	if !ok {
		return nil
	}
	return map[string]string{netv1beta1.RemoteClusterIDLabel: id}
}

// childMeta is the metadata of child gw-<name> of a gateway in namespace
// ns, owned by owner: the labels and annotations of its template tmpl, if
// any, with labels laid on top.
func childMeta(name, ns string, tmpl netv1beta1.TemplateMetadata, labels map[string]string, owner metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            childName(name),
		Namespace:       ns,
		Labels:          mergeLabels(tmpl.Labels, labels),
		Annotations:     tmpl.Annotations,
		OwnerReferences: []metav1.OwnerReference{owner},
	}
}

// mergeLabels returns base with over laid on top; nil when both are empty.
func mergeLabels(base, over map[string]string) map[string]string {
	if len(base)+len(over) == 0 {
		return nil
	}
	m := maps.Clone(base)
	if m == nil {
		m = map[string]string{}
	}
	maps.Copy(m, over)
	return m
}

// wgGateway is what the WgGatewayServer and WgGatewayClient reconcilers
// build alike: the gateway's workload, identity and keys.
type wgGateway struct {
	// obj is the WgGatewayServer or WgGatewayClient, owner of the children.
	obj client.Object
	// owner is the controller reference to obj set on every child.
	owner metav1.OwnerReference
	// gatewayResource is the plural of the gateway kind the agent reads:
	// gatewayservers or gatewayclients.
	gatewayResource string
	deployment      netv1beta1.DeploymentTemplate
	secretRef       corev1.LocalObjectReference
	// facts are what the gateway pod is told of this cluster.
	facts podFacts
}

// podFacts are what a gateway pod is told of this cluster in its
// environment.
type podFacts struct {
	// localRanges are this cluster's pod and external ranges.
	localRanges []netip.Prefix
	// unknownSource is this cluster's unknown-source address.
	unknownSource netip.Addr
	// serviceLimits bound what the peer may export to this cluster.
	serviceLimits mcs.Limits
}

// applyWorkload applies the gateway's ServiceAccount and RBAC, makes sure its
// key Secret is valid (generating it when needed) and applies its
// Deployment. It returns the reference to the key Secret and the public key
// it holds.
func applyWorkload(ctx context.Context, c client.Client, reader client.Reader, g wgGateway) (*corev1.ObjectReference, wgtypes.Key, error) {
	name, ns := g.obj.GetName(), g.obj.GetNamespace()
	secretName := templates.KeySecretName(name, g.secretRef)
	labels := childLabels(g.obj)
	for _, child := range gatewayIdentity(name, ns, g.gatewayResource, secretName, labels, g.owner) {
		if err := apply.Typed(ctx, c, reader, child); err != nil {
			return nil, wgtypes.Key{}, err
		}
	}
	secretKey := types.NamespacedName{Namespace: ns, Name: secretName}
	ref, pub, err := ensureKeys(ctx, c, reader, secretKey, secretName == childName(name), labels, g.owner)
	if err != nil {
		return nil, wgtypes.Key{}, err
	}
	dep := gatewayDeployment(g.deployment, name, ns, labels, g.owner, g.facts)
	if err := recreateFromOne(ctx, reader, dep); err != nil {
		return nil, wgtypes.Key{}, err
	}
	if err := apply.Typed(ctx, c, reader, dep); err != nil {
		return nil, wgtypes.Key{}, err
	}
	return ref, pub, nil
}

// recreateFromOne makes dep replace its pods at once (Recreate), where its
// template would roll them, while the Deployment in the cluster still runs,
// or is still replacing, a single replica. That pod carries the tunnel
// from its start and takes no part in the election of several replicas:
// beside new ones it would carry the tunnel too, with the same key. Once
// the replicas run, from a rollout that has ended, they roll.
func recreateFromOne(ctx context.Context, reader client.Reader, dep *appsv1.Deployment) error {
	if dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return nil
	}
	var live appsv1.Deployment
	err := reader.Get(ctx, client.ObjectKeyFromObject(dep), &live)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get deployment %s/%s: %w", dep.Namespace, dep.Name, err)
	}
	replicas := ptr.Deref(live.Spec.Replicas, 1)
	rolledOut := live.Status.ObservedGeneration >= live.Generation &&
		live.Status.UpdatedReplicas == replicas && live.Status.Replicas == replicas
	if replicas <= 1 || (live.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType && !rolledOut) {
		dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	}
	return nil
}

// gatewayIdentity builds the ServiceAccount gw-<name> the gateway pod runs
// as, and the Role and RoleBinding gw-<name> granting it what the agent
// needs in its namespace, and nothing more:
//   - its own key Secret, by name. A list or watch is allowed only with a
//     metadata.name field selector on that name; the agent reads the keys
//     from the mounted Secret anyway;
//   - its own gateway object, get by name. list and watch cannot be narrowed
//     to one name for a client that does not send a metadata.name field
//     selector (an informer usually does not), so they cover the gateway
//     kind in the namespace: those objects hold no secret;
//   - PublicKeys and Configurations of the namespace, to find the peer's key
//     and remapped ranges;
//   - Connections, which the agent creates and keeps up to date;
//   - the Lease gw-<name>, by name (create cannot be narrowed to a name,
//     list and watch not for an informer), through which the replicas of a
//     gateway elect the active one; a standby watches it to take it over
//     as soon as the active replica lets it go;
//   - pods of the namespace, get, list and patch: the active replica puts
//     the active label on its own pod and takes it off the other replicas'
//     (a pod name is not known before the pod exists). The label draws the
//     Service's traffic only; the controller and the fabric accept a pod as
//     active only when the gateway's own Deployment made it;
//   - its Service, get by name, and the EndpointSlice gw-<name>, by name
//     but for create: the active replica of a server whose Service selects
//     no pods publishes itself as its endpoint. That slice draws the
//     Service's traffic only, as the label does.
func gatewayIdentity(name, ns, gatewayResource, secretName string, labels map[string]string, owner metav1.OwnerReference) []client.Object {
	meta := func() metav1.ObjectMeta { return childMeta(name, ns, netv1beta1.TemplateMetadata{}, labels, owner) }
	read := []string{"get", "list", "watch"}
	group := netv1beta1.GroupVersion.Group
	return []client.Object{
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta(),
		},
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
			ObjectMeta: meta(),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secretName}, Verbs: read},
				{APIGroups: []string{group}, Resources: []string{gatewayResource}, ResourceNames: []string{name}, Verbs: []string{"get"}},
				{APIGroups: []string{group}, Resources: []string{gatewayResource}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{group}, Resources: []string{"publickeies", "configurations"}, Verbs: read},
				{APIGroups: []string{group}, Resources: []string{"connections"}, Verbs: []string{"create", "get", "list", "watch", "update", "patch"}},
				{APIGroups: []string{group}, Resources: []string{"connections/status"}, Verbs: []string{"get", "update", "patch"}},
				{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, ResourceNames: []string{childName(name)}, Verbs: []string{"get", "update"}},
				{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"create", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "patch"}},
				// A server of several replicas: the active one writes its
				// Service's EndpointSlice (create cannot be limited to a
				// name).
				{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{childName(name)}, Verbs: []string{"get"}},
				{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, ResourceNames: []string{childName(name)}, Verbs: []string{"get", "patch"}},
				{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: []string{"create"}},
				// The service exchange: the exports to send, read; the
				// peer's exports received, written in shards (create
				// cannot be limited to a name), a shard no longer used
				// deleted.
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: read},
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: mcs.ShardNames(mcs.ImportsConfigMap), Verbs: []string{"update", "patch"}},
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: mcs.ShardNames(mcs.ImportsConfigMap)[1:], Verbs: []string{"delete"}},
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
			},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
			ObjectMeta: meta(),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: childName(name)},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: childName(name), Namespace: ns}},
		},
	}
}

// gatewayDeployment builds Deployment gw-<name> from the rendered template,
// with two things no template decides: the pod runs as ServiceAccount
// gw-<name>, the one the controller made with just the rights the agent
// needs (another account would lend the gateway whatever it holds), and
// every container gets this cluster's pod and external ranges in
// PEERLINK_LOCAL_CIDRS, the only destinations the gateway lets out of the
// tunnel, and the cluster's unknown-source address in
// PEERLINK_UNKNOWN_SOURCE (when it has one), which the nodes' own packets
// leave the gateway as, and the limits of what the peer may export in
// PEERLINK_SERVICE_LIMITS when they are not the defaults (so that a
// default install renders the pod as before).
func gatewayDeployment(t netv1beta1.DeploymentTemplate, name, ns string, labels map[string]string, owner metav1.OwnerReference, facts podFacts) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"},
		ObjectMeta: childMeta(name, ns, t.Metadata, labels, owner),
		Spec:       *t.Spec.DeepCopy(),
	}
	pod := &d.Spec.Template.Spec
	pod.ServiceAccountName = childName(name)
	pod.DeprecatedServiceAccount = ""
	local := facts.localRanges
	ranges := make([]string, len(local))
	for i, p := range local {
		ranges[i] = p.String()
	}
	env := []corev1.EnvVar{{Name: netv1beta1.LocalCIDRsEnv, Value: strings.Join(ranges, ",")}}
	if facts.unknownSource.IsValid() {
		env = append(env, corev1.EnvVar{Name: netv1beta1.UnknownSourceEnv, Value: facts.unknownSource.String()})
	}
	if l := facts.serviceLimits.WithDefaults(); l != mcs.DefaultLimits {
		env = append(env, corev1.EnvVar{Name: netv1beta1.ServiceLimitsEnv, Value: l.String()})
	}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		for _, e := range env {
			c.Env = append(slices.DeleteFunc(c.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name }), e)
		}
	}
	if slices.ContainsFunc(local, func(p netip.Prefix) bool { return p.Addr().Is6() }) {
		addIPv6Forwarding(pod)
	}
	return d
}

// ipv6ForwardingSysctl is what a gateway pod needs set to forward IPv6.
const ipv6ForwardingSysctl = "net.ipv6.conf.all.forwarding"

// IPv6ForwardingContainer names the init container that turns on IPv6
// forwarding in a gateway pod.
const IPv6ForwardingContainer = "ipv6-forwarding"

// addIPv6Forwarding gives the pod of a cluster with IPv6 ranges a first
// init container that turns on IPv6 forwarding in the pod's network
// namespace, unless the pod's sysctls set it already (a template may,
// where the kubelets allow that sysctl). The gateway agent cannot do it:
// an unprivileged container sees /proc/sys read-only, and Kubernetes counts
// the sysctl among the unsafe ones, which kubelets refuse unless told
// otherwise. The init container runs the agent's own image, privileged,
// for that one write, and ends before the gateway starts.
func addIPv6Forwarding(pod *corev1.PodSpec) {
	if pod.SecurityContext != nil && slices.ContainsFunc(pod.SecurityContext.Sysctls, func(s corev1.Sysctl) bool { return s.Name == ipv6ForwardingSysctl }) {
		return
	}
	if len(pod.Containers) == 0 || slices.ContainsFunc(pod.InitContainers, func(c corev1.Container) bool { return c.Name == IPv6ForwardingContainer }) {
		return
	}
	gw := pod.Containers[0]
	init := corev1.Container{
		Name:            IPv6ForwardingContainer,
		Image:           gw.Image,
		ImagePullPolicy: gw.ImagePullPolicy,
		Args:            []string{IPv6ForwardingContainer},
		SecurityContext: &corev1.SecurityContext{
			Privileged:             ptr.To(true),
			RunAsUser:              ptr.To[int64](0),
			ReadOnlyRootFilesystem: ptr.To(true),
		},
	}
	pod.InitContainers = append([]corev1.Container{init}, pod.InitContainers...)
}

// gatewayService builds Service gw-<name> from the rendered template.
func gatewayService(t netv1beta1.ServiceTemplate, name, ns string, labels map[string]string, owner metav1.OwnerReference) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(name, ns, t.Metadata, labels, owner),
		Spec:       *t.Spec.DeepCopy(),
	}
}

// removeStaleSlices deletes the EndpointSlices of the gateway's Service
// that its selector, or the lack of one, leaves behind: with a selector
// (one replica), the slice the active replica wrote; without (several),
// the EndpointSlice controller's, which that controller stops updating
// but does not delete when the selector goes, and the Endpoints the
// Endpoints controller leaves the same way, which Kubernetes would mirror
// into a new slice. Either would keep the address of a pod that is gone
// among the Service's endpoints.
func removeStaleSlices(ctx context.Context, c client.Client, svc *corev1.Service) error {
	stale := discoveryv1.LabelManagedBy + "=" + netv1beta1.GatewayEndpointSliceManager
	if len(svc.Spec.Selector) == 0 {
		stale = discoveryv1.LabelManagedBy + "!=" + netv1beta1.GatewayEndpointSliceManager
		//lint:ignore SA1019 the deprecated Endpoints left by the Endpoints controller are what is deleted
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}}
		if err := c.Delete(ctx, ep); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the stale Endpoints %s/%s: %w", svc.Namespace, svc.Name, err)
		}
	}
	sel, err := labels.Parse(discoveryv1.LabelServiceName + "=" + svc.Name + "," + stale)
	if err != nil {
		return fmt.Errorf("selector of the stale EndpointSlices of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	var list discoveryv1.EndpointSliceList
	if err := c.List(ctx, &list, client.InNamespace(svc.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("list the EndpointSlices of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	for i := range list.Items {
		if err := c.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete stale EndpointSlice %s/%s: %w", svc.Namespace, list.Items[i].Name, err)
		}
	}
	return nil
}
