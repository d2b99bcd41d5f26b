package installer

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"net/netip"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/bundles"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/kbuild"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/peering"
	"github.com/peerlink/peerlink/templates"
)

// Namespace is where the install bundle puts peerlink.
const Namespace = templates.InstallNamespace

// The workloads the install waits for.
const (
	ControllerDeployment = "peerlink-controller"
	FabricDaemonSet      = "peerlink-fabric"
)

// factsConfigMap is the ConfigMap generator of the bundle holding the
// facts, whose keys the controller's flags take.
const factsConfigMap = "peerlink-facts"

// Facts are the facts an admin gives; zero values are left to the
// controller, which detects the cluster ID, the pod CIDRs and the service
// CIDR, and has defaults for the others.
type Facts struct {
	ClusterID   string
	PodCIDRs    []netip.Prefix
	ServiceCIDR netip.Prefix
	// ReservedCIDRs are further ranges in use in the cluster.
	ReservedCIDRs []netip.Prefix
}

// literals are the facts as KEY=value literals of the facts ConfigMap,
// only those given.
func (f Facts) literals() []string {
	var out []string
	if f.ClusterID != "" {
		out = append(out, "CLUSTER_ID="+f.ClusterID)
	}
	if len(f.PodCIDRs) > 0 {
		out = append(out, "POD_CIDRS="+rangepolicy.Format(f.PodCIDRs))
	}
	if f.ServiceCIDR.IsValid() {
		out = append(out, "SERVICE_CIDR="+f.ServiceCIDR.String())
	}
	if len(f.ReservedCIDRs) > 0 {
		out = append(out, "RESERVED_CIDRS="+rangepolicy.Format(f.ReservedCIDRs))
	}
	return out
}

// Validate checks the given facts; errors name the flag of `peerlink
// install` that sets each.
func (f Facts) Validate() error {
	if f.ClusterID != "" {
		if err := clusterinfo.ValidateClusterID(f.ClusterID); err != nil {
			return fmt.Errorf("--cluster-id: %w", err)
		}
	}
	var ranges []netip.Prefix
	var flags []string
	add := func(flag string, ps ...netip.Prefix) {
		for _, p := range ps {
			if p.IsValid() {
				ranges, flags = append(ranges, p), append(flags, flag)
			}
		}
	}
	add("--pod-cidr", f.PodCIDRs...)
	add("--service-cidr", f.ServiceCIDR)
	add("--reserved-cidr", f.ReservedCIDRs...)
	if i, j, ok := cidr.FirstOverlap(ranges); ok {
		return fmt.Errorf("%s %s overlaps %s %s: the cluster's ranges must be disjoint", flags[i], ranges[i], flags[j], ranges[j])
	}
	return nil
}

// Objects builds the embedded install bundle with the given facts.
func Objects(f Facts) ([]*unstructured.Unstructured, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	mem := filesys.MakeFsInMemory()
	src := bundles.Install()
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/install", p), data)
	})
	if err != nil {
		return nil, fmt.Errorf("install bundle: %w", err)
	}
	overlay := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{"../install"},
	}
	if lits := f.literals(); len(lits) > 0 {
		overlay["configMapGenerator"] = []any{map[string]any{
			"name": factsConfigMap, "namespace": Namespace, "behavior": "merge", "literals": lits,
		}}
	}
	data, err := yaml.Marshal(overlay)
	if err != nil {
		return nil, err
	}
	if err := mem.WriteFile("/overlay/kustomization.yaml", data); err != nil {
		return nil, err
	}
	return kbuild.BuildFS(mem, "/overlay")
}

// isCRD tells whether obj is a CustomResourceDefinition.
func isCRD(obj *unstructured.Unstructured) bool {
	return obj.GetKind() == "CustomResourceDefinition" && obj.GroupVersionKind().Group == apiextensionsv1.GroupName
}

// Apply server-side applies objs under the CLI's field manager: the
// CustomResourceDefinitions first, waited for until established, then the
// rest in order. A field another manager owns is not taken over; the
// conflict is reported.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, p peering.Progress) error {
	crds, rest := splitCRDs(objs)
	for _, o := range crds {
		if err := peering.ApplyUnstructured(ctx, c, o); err != nil {
			return err
		}
	}
	p.Infof("%d CustomResourceDefinitions applied", len(crds))
	for _, o := range crds {
		name := o.GetName()
		_, err := p.Wait(ctx, "CustomResourceDefinition "+name+" to be established", func(ctx context.Context) (bool, string, error) {
			// Read as unstructured: the CLI's scheme has no
			// apiextensions kinds.
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			if err := c.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
				return false, "", err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				if m, _ := cond.(map[string]any); m["type"] == string(apiextensionsv1.Established) && m["status"] == string(apiextensionsv1.ConditionTrue) {
					return true, "established", nil
				}
			}
			return false, "not established yet", nil
		})
		if err != nil {
			return err
		}
	}
	for _, o := range rest {
		if err := peering.ApplyUnstructured(ctx, c, o); err != nil {
			return err
		}
	}
	p.Infof("%d objects applied", len(rest))
	return nil
}

// splitCRDs separates the CRDs from the other objects, keeping the order.
func splitCRDs(objs []*unstructured.Unstructured) (crds, rest []*unstructured.Unstructured) {
	for _, o := range objs {
		if isCRD(o) {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	return crds, rest
}

// WaitReady waits until the controller Deployment is available with its
// current spec, every fabric agent runs the current spec, and the
// controller has published the cluster's facts, which it returns. A
// controller that keeps stopping while it waits fails the wait at once,
// with the reason the controller gave.
func WaitReady(ctx context.Context, c client.Client, p peering.Progress) (clusterinfo.Info, error) {
	var stops controllerStops
	_, err := p.Wait(ctx, "the controller to run", func(ctx context.Context) (bool, string, error) {
		var d appsv1.Deployment
		if err := c.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: ControllerDeployment}, &d); err != nil {
			return false, "", err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if err := stops.check(ctx, c); err != nil {
			return false, "", err
		}
		s := d.Status
		state := fmt.Sprintf("%d of %d replicas updated and available", min(s.UpdatedReplicas, s.AvailableReplicas), want)
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas >= want && s.Replicas == want, state, nil
	})
	if err != nil {
		return clusterinfo.Info{}, err
	}
	_, err = p.Wait(ctx, "the fabric agent to run on every node", func(ctx context.Context) (bool, string, error) {
		var ds appsv1.DaemonSet
		if err := c.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: FabricDaemonSet}, &ds); err != nil {
			return false, "", err
		}
		s := ds.Status
		state := fmt.Sprintf("%d of %d nodes updated and ready", min(s.UpdatedNumberScheduled, s.NumberReady), s.DesiredNumberScheduled)
		return s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled > 0 &&
			s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled, state, nil
	})
	if err != nil {
		return clusterinfo.Info{}, err
	}
	var info clusterinfo.Info
	_, err = p.Wait(ctx, "the controller to publish the cluster's facts", func(ctx context.Context) (bool, string, error) {
		var err error
		info, err = clusterinfo.Read(ctx, c, Namespace)
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "published", nil
	})
	return info, err
}

// crashLoopRestarts is how many times a controller container must have
// stopped, and be waiting to start again, before WaitReady gives up on it:
// a controller that stops once may have met a passing failure.
const crashLoopRestarts = 2

// controllerStops tells a controller that keeps stopping during a wait
// from one that stopped before it: an install run again after the cause
// was fixed waits for the controller's next start instead of reporting its
// old stops.
type controllerStops struct {
	// before are the restart counts of the controller's containers when
	// the wait began, by pod UID and container name; nil until then.
	before map[string]int32
}

// check returns why the controller keeps stopping: the termination message
// of a controller container in CrashLoopBackOff after crashLoopRestarts
// restarts, one of them at least during the wait (a fact it cannot detect,
// a flag it refuses); nil while none does.
func (s *controllerStops) check(ctx context.Context, c client.Client) error {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(Namespace), client.MatchingLabels{"app.kubernetes.io/name": ControllerDeployment}); err != nil {
		return fmt.Errorf("list the controller's pods: %w", err)
	}
	first := s.before == nil
	if first {
		s.before = map[string]int32{}
	}
	for _, pod := range pods.Items {
		for _, cs := range pod.Status.ContainerStatuses {
			key := string(pod.UID) + "/" + cs.Name
			if first {
				s.before[key] = cs.RestartCount
				continue
			}
			last := cs.LastTerminationState.Terminated
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || last == nil ||
				cs.RestartCount < crashLoopRestarts || cs.RestartCount <= s.before[key] {
				continue
			}
			return fmt.Errorf("the controller stopped %d times (pod %s/%s, exit code %d): %s",
				cs.RestartCount, Namespace, pod.Name, last.ExitCode, strings.TrimSpace(cmp.Or(last.Message, last.Reason)))
		}
	}
	return nil
}

// Summary describes the facts the controller published, one line each,
// with where each comes from.
func Summary(info clusterinfo.Info) []string {
	service := "unknown"
	if info.ServiceCIDR.IsValid() {
		service = info.ServiceCIDR.String()
	}
	var out []string
	for _, fact := range []struct {
		name, key, value string
	}{
		{"cluster ID", clusterinfo.KeyClusterID, info.ClusterID},
		{"pod CIDRs", clusterinfo.KeyPodCIDRs, rangepolicy.Format(info.PodCIDRs)},
		{"service CIDR", clusterinfo.KeyServiceCIDR, service},
	} {
		source := info.Sources[fact.key]
		if source == "" {
			source = "source not published"
		}
		out = append(out, fmt.Sprintf("%s: %s (%s)", fact.name, fact.value, source))
	}
	return out
}
