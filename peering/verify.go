package peering

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/api"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/kube"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/peering/probe"
	"github.com/peerlink/peerlink/templates"
)

// VerifyNamespace is the namespace `peerlink verify` starts its pods in, in
// both clusters, and deletes when it is done.
const VerifyNamespace = "peerlink-verify"

// The paths verify checks from each cluster to the other.
const (
	PathPodToPod  = "pod to pod"
	PathNodeToPod = "node to pod"
	PathService   = "Service by clusterset name"
)

// probePort is the port the echo pods answer on.
const probePort = 8090

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// PeerlinkNamespace is where each cluster's controller runs; the
	// probes run its image.
	PeerlinkNamespace string
	// Attempts is how many requests each path gets, a second apart,
	// before it counts as failed.
	Attempts int
	// Keep leaves the namespace and its pods in place, for a look.
	Keep bool
}

// PathResult is one path checked from one cluster to the other.
type PathResult struct {
	From string `json:"from"`
	To   string `json:"to"`
	Path string `json:"path"`
	URL  string `json:"url"`
	OK   bool   `json:"ok"`
	// AnsweredBy names the pod that answered, when one did.
	AnsweredBy string  `json:"answeredBy,omitempty"`
	Attempts   int     `json:"attempts"`
	Seconds    float64 `json:"seconds,omitempty"`
	// Error says why the path failed.
	Error string `json:"error,omitempty"`
}

// Verification is what `peerlink verify` prints.
type Verification struct {
	Paths []PathResult `json:"paths"`
}

// Failed counts the paths that failed.
func (v *Verification) Failed() int {
	return countFailed(v.Paths, func(p PathResult) bool { return p.OK })
}

// WriteSummary writes the paths as a table.
func (v *Verification) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FROM\tTO\tPATH\tRESULT\tDETAIL")
	for _, p := range v.Paths {
		result, detail := "ok", fmt.Sprintf("answered by %s in %.2fs (attempt %d)", p.AnsweredBy, p.Seconds, p.Attempts)
		if !p.OK {
			result, detail = "FAILED", fmt.Sprintf("%s after %d attempts: %s", p.URL, p.Attempts, p.Error)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.From, p.To, p.Path, result, detail)
	}
	_ = tw.Flush() // w is the command's output
}

// side is one cluster of the verification and what verify started there.
type side struct {
	*Cluster
	id, image string
	echo      *corev1.Pod
}

// Verify checks the peering of local and remote as traffic sees it: in
// each cluster it starts, in VerifyNamespace, an echo pod behind an
// exported Service, then pods that ask the other cluster's echo pod by its
// address as this cluster reaches it, from a pod and from a node (host
// network), and its Service by clusterset name; each answer must come from
// that echo pod. The pods run the image of each cluster's controller. The
// namespace goes at the end unless o.Keep.
func Verify(ctx context.Context, local, remote *Cluster, o VerifyOptions) (*Verification, error) {
	sides := []*side{{Cluster: local, id: local.Info.ClusterID}, {Cluster: remote, id: remote.Info.ClusterID}}
	for _, s := range sides {
		img, err := controllerImage(ctx, s.Client, o.PeerlinkNamespace)
		if err != nil {
			return nil, fmt.Errorf("%s cluster: %w", s.Name, err)
		}
		s.image = img
	}
	if !o.Keep {
		defer func() {
			for _, s := range sides {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: VerifyNamespace}}
				if err := s.Client.Delete(context.WithoutCancel(ctx), ns); client.IgnoreNotFound(err) != nil {
					s.Progress.Infof("Could not delete namespace %s: %v", VerifyNamespace, err)
				}
			}
		}()
	}
	for _, s := range sides {
		if err := s.startEcho(ctx); err != nil {
			return nil, err
		}
	}
	for _, s := range sides {
		if err := s.waitEcho(ctx); err != nil {
			return nil, err
		}
	}
	v := &Verification{}
	for i, s := range sides {
		peer := sides[1-i]
		paths, err := s.check(ctx, peer, o.Attempts)
		if err != nil {
			return nil, err
		}
		v.Paths = append(v.Paths, paths...)
	}
	return v, nil
}

// controllerImage is the image of the controller's container.
func controllerImage(ctx context.Context, c client.Client, ns string) (string, error) {
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: templates.ControllerDeployment}, &d); err != nil {
		return "", fmt.Errorf("deployment %s/%s, whose image the probes run: %w", ns, templates.ControllerDeployment, err)
	}
	for _, ct := range d.Spec.Template.Spec.Containers {
		if ct.Name == "controller" {
			return ct.Image, nil
		}
	}
	return "", fmt.Errorf("deployment %s/%s has no container named controller", ns, templates.ControllerDeployment)
}

// echoName names the echo pod, its Service and its export in the cluster
// of id: the names differ between clusters, so that a call by clusterset
// name goes to the other cluster's (an import of one name exported by both
// would prefer the caller's own endpoints).
func echoName(id string) string { return "echo-" + id }

// apply server-side applies obj under the CLI's field manager.
func (s *side) apply(ctx context.Context, obj client.Object) error {
	if err := api.Apply(ctx, s.Client, obj, client.FieldOwner(api.CLIFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("%s cluster: apply %s %s: %w", s.Name, obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	return nil
}

// startEcho makes the namespace, the echo pod, its Service and its
// ServiceExport.
func (s *side) startEcho(ctx context.Context) error {
	name := echoName(s.id)
	labels := map[string]string{"app.kubernetes.io/name": "peerlink-verify", "app.kubernetes.io/part-of": "peerlink", "peerlink.io/verify": name}
	ns := &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: VerifyNamespace, Labels: map[string]string{
			mcs.ImportNamespaceLabel: "true",
			// The node probe runs on the host network.
			"pod-security.kubernetes.io/enforce": "privileged",
			"app.kubernetes.io/part-of":          "peerlink",
		}},
	}
	pod := s.pod(name, labels, false, "serve", fmt.Sprintf("--listen=:%d", probePort), "--pod-name="+name)
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(probePort)}}, PeriodSeconds: 1}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: VerifyNamespace, Name: name, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"peerlink.io/verify": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: probePort, Protocol: corev1.ProtocolTCP}},
		},
	}
	export := &mcsv1beta1.ServiceExport{
		TypeMeta:   metav1.TypeMeta{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: "ServiceExport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: VerifyNamespace, Name: name},
	}
	if err := s.waitNamespaceGone(ctx); err != nil {
		return err
	}
	s.Progress.Infof("Starting the echo pod %s/%s, its Service and its export", VerifyNamespace, name)
	for _, o := range []client.Object{ns, pod, svc, export} {
		if err := s.apply(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// waitNamespaceGone waits until VerifyNamespace, when a previous run left
// it terminating, is gone: nothing can be made in it meanwhile.
func (s *side) waitNamespaceGone(ctx context.Context) error {
	_, err := s.Progress.Wait(ctx, "namespace "+VerifyNamespace+" of a previous verify gone", func(ctx context.Context) (bool, string, error) {
		var ns corev1.Namespace
		err := s.Client.Get(ctx, client.ObjectKey{Name: VerifyNamespace}, &ns)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", fmt.Errorf("%s cluster: get namespace %s: %w", s.Name, VerifyNamespace, err)
		}
		if ns.DeletionTimestamp == nil {
			return true, "", nil
		}
		return false, "terminating", nil
	})
	return err
}

// pod is a pod of verify running `peerlink-agent probe args...`.
func (s *side) pod(name string, labels map[string]string, hostNetwork bool, args ...string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: VerifyNamespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			HostNetwork:                   hostNetwork,
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "probe",
				Image:           s.image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Args:            append([]string{"probe"}, args...),
			}},
		},
	}
}

// waitEcho waits until the echo pod is ready with an address.
func (s *side) waitEcho(ctx context.Context) error {
	name := echoName(s.id)
	_, err := s.Progress.Wait(ctx, "echo pod "+name+" ready", func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: VerifyNamespace, Name: name}, &p); err != nil {
			return false, "", fmt.Errorf("%s cluster: %w", s.Name, err)
		}
		if !kube.PodReady(&p) || p.Status.PodIP == "" {
			return false, "phase " + string(p.Status.Phase), nil
		}
		s.echo = &p
		return true, "ready at " + p.Status.PodIP, nil
	})
	return err
}

// check runs the probes of s against peer's echo pod and reads their
// results.
func (s *side) check(ctx context.Context, peer *side, attempts int) ([]PathResult, error) {
	remapped, err := s.remapped(ctx, peer)
	if err != nil {
		return nil, err
	}
	target := fmt.Sprintf("http://%s/", netip.AddrPortFrom(remapped, probePort))
	service := fmt.Sprintf("http://%s.%s.svc.clusterset.local:%d/", echoName(peer.id), VerifyNamespace, probePort)
	if state, err := s.tunnel(ctx, peer); err != nil {
		return nil, err
	} else if state != netv1beta1.Connected {
		s.Progress.Infof("The tunnel to %s is %q, not Connected: every path from this cluster will fail", peer.id, state)
	} else if _, err := s.Progress.Wait(ctx, "the import of "+echoName(peer.id), func(ctx context.Context) (bool, string, error) {
		var si mcsv1beta1.ServiceImport
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: VerifyNamespace, Name: echoName(peer.id)}, &si)
		switch {
		case apierrors.IsNotFound(err):
			return false, "no ServiceImport yet", nil
		case err != nil:
			return false, "", err
		case len(si.Spec.IPs) == 0:
			return false, "no clusterset IP yet", nil
		}
		return true, "clusterset IP " + si.Spec.IPs[0], nil
	}); err != nil {
		// The Service path fails below, named; the others still run.
		s.Progress.Infof("The Service path will fail: %v", err)
	}
	tries := fmt.Sprintf("--attempts=%d", attempts)
	probes := []struct {
		pod         string
		hostNetwork bool
		paths       map[string]string
	}{
		{"from-pod-to-" + peer.id, false, map[string]string{PathPodToPod: target, PathService: service}},
		{"from-node-to-" + peer.id, true, map[string]string{PathNodeToPod: target}},
	}
	for _, p := range probes {
		args := []string{"check", tries}
		for _, path := range []string{PathPodToPod, PathNodeToPod, PathService} {
			if url, ok := p.paths[path]; ok {
				args = append(args, "--target="+path+"="+url)
			}
		}
		pod := s.pod(p.pod, map[string]string{"app.kubernetes.io/name": "peerlink-verify", "app.kubernetes.io/part-of": "peerlink"}, p.hostNetwork, args...)
		if p.hostNetwork {
			pod.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
		}
		// A probe of an earlier run is replaced: a pod's spec is fixed.
		if err := s.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("%s cluster: delete pod %s: %w", s.Name, p.pod, err)
		}
		if _, err := s.Progress.Wait(ctx, "pod "+p.pod+" of an earlier run gone", func(ctx context.Context) (bool, string, error) {
			err := s.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
			return apierrors.IsNotFound(err), "still there", client.IgnoreNotFound(err)
		}); err != nil {
			return nil, err
		}
		s.Progress.Infof("Checking %s from pod %s", strings.Join(keys(p.paths), ", "), p.pod)
		if err := s.Client.Create(ctx, pod); err != nil {
			return nil, fmt.Errorf("%s cluster: create pod %s: %w", s.Name, p.pod, err)
		}
	}
	var out []PathResult
	for _, p := range probes {
		results, err := s.results(ctx, p.pod, len(p.paths))
		if err != nil {
			return nil, err
		}
		for _, r := range results {
			pr := PathResult{From: s.id, To: peer.id, Path: r.Name, URL: r.URL, Attempts: r.Attempts, Seconds: r.Seconds, Error: r.Error}
			switch {
			case !r.OK:
			case r.Answer.Pod != peer.echo.Name:
				pr.Error = fmt.Sprintf("answered by %q, not by %s of cluster %s", r.Answer.Pod, peer.echo.Name, peer.id)
			default:
				pr.OK, pr.AnsweredBy = true, r.Answer.Pod
			}
			out = append(out, pr)
		}
	}
	return out, nil
}

// tunnel is the state of s's Connection to peer, "" when it has none.
func (s *side) tunnel(ctx context.Context, peer *side) (netv1beta1.ConnectionStatusValue, error) {
	var conns netv1beta1.ConnectionList
	if err := s.Client.List(ctx, &conns, client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: peer.id}); err != nil {
		return "", fmt.Errorf("%s cluster: list Connections: %w", s.Name, err)
	}
	var state netv1beta1.ConnectionStatusValue
	for _, c := range conns.Items {
		if state = c.Status.Value; state == netv1beta1.Connected {
			break
		}
	}
	return state, nil
}

// keys returns the keys of m in the order of the paths.
func keys(m map[string]string) []string {
	var out []string
	for _, path := range []string{PathPodToPod, PathNodeToPod, PathService} {
		if _, ok := m[path]; ok {
			out = append(out, path)
		}
	}
	return out
}

// remapped is the address under which s reaches peer's echo pod, from s's
// Configuration of peer.
func (s *side) remapped(ctx context.Context, peer *side) (netip.Addr, error) {
	var confs netv1beta1.ConfigurationList
	if err := s.Client.List(ctx, &confs, client.MatchingLabels{netv1beta1.RemoteClusterIDLabel: peer.id}); err != nil {
		return netip.Addr{}, fmt.Errorf("%s cluster: list Configurations: %w", s.Name, err)
	}
	if len(confs.Items) != 1 {
		return netip.Addr{}, fmt.Errorf("%s cluster: %d Configurations of peer %s, want one: is it peered with %s?", s.Name, len(confs.Items), peer.id, peer.id)
	}
	addr, err := netip.ParseAddr(peer.echo.Status.PodIP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s cluster: pod %s: address %q: %w", peer.Name, peer.echo.Name, peer.echo.Status.PodIP, err)
	}
	r, err := confs.Items[0].RemappedAddr(addr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s cluster: %w", s.Name, err)
	}
	return r, nil
}

// results waits until probe pod name ends and reads the n results it
// printed.
func (s *side) results(ctx context.Context, name string, n int) ([]probe.Result, error) {
	if _, err := s.Progress.Wait(ctx, "pod "+name+" done", func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: VerifyNamespace, Name: name}, &p); err != nil {
			return false, "", err
		}
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, "phase " + string(p.Status.Phase), nil
	}); err != nil {
		return nil, fmt.Errorf("%s cluster: %w", s.Name, err)
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return nil, err
	}
	logs, err := cs.CoreV1().Pods(VerifyNamespace).GetLogs(name, &corev1.PodLogOptions{LimitBytes: ptr.To(int64(64 << 10))}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: logs of pod %s: %w", s.Name, name, err)
	}
	results, err := probe.ReadResults(bytes.NewReader(logs), n)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: pod %s: %w", s.Name, name, err)
	}
	if len(results) != n {
		return nil, fmt.Errorf("%s cluster: pod %s printed %d results, want %d: %.500s", s.Name, name, len(results), n, logs)
	}
	return results, nil
}
