package labctl

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/echoapi"
	"github.com/peerlink/peerlink/lab/internal/images"
)

// Echo is how the lab deploys its echo server in every cluster.
const (
	EchoNamespace  = "default"
	EchoDeployment = "echo"
	EchoReplicas   = 2
	EchoPort       = 8080
	EchoSinkPort   = 9000
	EchoRRPort     = 9001
)

// EchoPods lists the echo pods of a cluster.
func (l *Lab) EchoPods(ctx context.Context, n *cluster.Cluster) ([]corev1.Pod, error) {
	cs, err := n.Clientset()
	if err != nil {
		return nil, err
	}
	pods, err := cs.CoreV1().Pods(EchoNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + EchoDeployment})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: list echo pods: %w", n.Name, err)
	}
	return pods.Items, nil
}

// echoPodsOf lists the echo pods of src and those of dst; neither list is
// empty.
func (l *Lab) echoPodsOf(ctx context.Context, src, dst *cluster.Cluster) (fromPods, toPods []corev1.Pod, err error) {
	if fromPods, err = l.EchoPods(ctx, src); err != nil {
		return nil, nil, err
	}
	if toPods, err = l.EchoPods(ctx, dst); err != nil {
		return nil, nil, err
	}
	if len(fromPods) == 0 || len(toPods) == 0 {
		return nil, nil, fmt.Errorf("no echo pods in %s or %s", src.Name, dst.Name)
	}
	return fromPods, toPods, nil
}

// EchoGet runs `echo get url` in an echo pod of cluster n.
func (l *Lab) EchoGet(ctx context.Context, n *cluster.Cluster, pod, url string) (echoapi.Got, error) {
	var got echoapi.Got
	out, err := l.Kubectl(ctx, n, "-n", EchoNamespace, "exec", pod, "--", "/echo", "get", "--timeout=2s", url)
	if err != nil {
		return got, err
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return got, fmt.Errorf("cluster %s: echo get %s: %w: %s", n.Name, url, err, out)
	}
	return got, nil
}

// StartEcho starts one more echo server, as a bare pod, in cluster n.
func (l *Lab) StartEcho(ctx context.Context, n *cluster.Cluster, name, node string) error {
	cs, err := n.Clientset()
	if err != nil {
		return err
	}
	spec := l.echoPodSpec()
	spec.NodeName = node
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: EchoNamespace}, Spec: spec}
	if _, err := cs.CoreV1().Pods(EchoNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster %s: create echo pod %s: %w", n.Name, name, err)
	}
	return nil
}

// EchoURL is the URL of the echo server at ip, of either family.
func EchoURL(ip netip.Addr) string {
	return "http://" + netip.AddrPortFrom(ip, EchoPort).String() + "/"
}

// echoPodSpec is the pod of an echo server: it answers on EchoPort, takes
// streams on EchoSinkPort and echoes on EchoRRPort.
func (l *Lab) echoPodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []corev1.Container{{
			Name:            "echo",
			Image:           images.EchoImage(l.State.Registry),
			ImagePullPolicy: corev1.PullIfNotPresent,
			Args:            []string{"serve"},
			Env: []corev1.EnvVar{{
				Name:      "POD_IP",
				ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}},
			}},
			Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: EchoPort},
				{Name: "sink", ContainerPort: EchoSinkPort},
				{Name: "rr", ContainerPort: EchoRRPort},
			},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt(EchoPort)}},
				PeriodSeconds: 1,
			},
		}},
	}
}

// ProbeTimeout is the time limit of a probe's request unless said
// otherwise: short, so that a request whose packets are lost in an outage
// fails instead of waiting for TCP to send them again (after 1 s for a
// SYN), and the gaps between answers measure the outage.
const ProbeTimeout = time.Second

// StartProbe starts a pod in cluster n that runs `echo probe` against url
// for the given time, each request limited to ProbeTimeout, so that
// traffic is measured from inside the cluster even while its API server is
// down.
func (l *Lab) StartProbe(ctx context.Context, n *cluster.Cluster, name, url string, interval, d time.Duration) error {
	return l.StartProbeOn(ctx, n, "", name, url, interval, ProbeTimeout, d)
}

// StartProbeOn is StartProbe on the given node ("" leaves it to the
// scheduler), each request limited to timeout.
func (l *Lab) StartProbeOn(ctx context.Context, n *cluster.Cluster, node, name, url string, interval, timeout, d time.Duration) error {
	cs, err := n.Clientset()
	if err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: EchoNamespace},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:            "probe",
				Image:           images.EchoImage(l.State.Registry),
				ImagePullPolicy: corev1.PullIfNotPresent,
				Args:            []string{"probe", "--interval=" + interval.String(), "--timeout=" + timeout.String(), "--duration=" + d.String(), url},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(EchoNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster %s: create probe pod %s: %w", n.Name, name, err)
	}
	return nil
}

// ProbeResults reads what the probe pod name has printed so far, in the
// order the requests were sent (the probe prints them as they end).
func (l *Lab) ProbeResults(ctx context.Context, n *cluster.Cluster, name string) ([]echoapi.Probe, error) {
	out, err := l.Kubectl(ctx, n, "-n", EchoNamespace, "logs", name)
	if err != nil {
		return nil, err
	}
	var probes []echoapi.Probe
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var p echoapi.Probe
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			return nil, fmt.Errorf("cluster %s: probe %s printed %q: %w", n.Name, name, line, err)
		}
		probes = append(probes, p)
	}
	slices.SortStableFunc(probes, func(x, y echoapi.Probe) int { return cmp.Compare(x.UnixMilli, y.UnixMilli) })
	return probes, nil
}

// LongestGap is the longest time in [from, until) without a prompt answer
// to a probe, of probes in the order sent: between two answers, between
// from and the first answer, or between the last answer and until. An
// answer is prompt when it came within ProbeTimeout: one that took longer
// (a request of a probe with a longer timeout, answered once TCP sent a
// lost packet again) was sent while the path was down.
func LongestGap(probes []echoapi.Probe, from, until time.Time) time.Duration {
	last := from
	var longest time.Duration
	for _, p := range probes {
		at := time.UnixMilli(p.UnixMilli)
		if !p.OK || time.Duration(p.Millis)*time.Millisecond > ProbeTimeout || at.Before(from) {
			continue
		}
		if !at.Before(until) {
			break
		}
		longest = max(longest, at.Sub(last))
		last = at
	}
	return max(longest, until.Sub(last))
}

// writeEcho writes the echo server's Deployment and its Service, which pods
// call by name through the cluster DNS.
func (l *Lab) writeEcho(n *cluster.Cluster) (string, error) {
	labels := map[string]string{"app": EchoDeployment}
	deploy := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: EchoDeployment, Namespace: EchoNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](EchoReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       l.echoPodSpec(),
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: EchoDeployment, Namespace: EchoNamespace, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: EchoPort, Protocol: corev1.ProtocolTCP}},
		},
	}
	var b []byte
	for _, obj := range []any{deploy, svc} {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return "", err
		}
		b = append(append(b, "---\n"...), data...)
	}
	path := filepath.Join(n.Dir, "echo.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("cluster %s echo: %w", n.Name, err)
	}
	return path, nil
}
