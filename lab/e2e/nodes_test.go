package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/internal/httpjson"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/echoapi"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
)

// checkNodesReach checks what the nodes of two peered clusters send, on
// nodes that filter reverse paths strictly: from the host network of every
// node of each cluster, and from a host-network pod on every node, a
// request reaches each of the peer's placed pods (placedPods), which sees
// the caller as the caller's unknown-source address in its own cluster's
// view. Then a pod and every node of the first cluster call the echo
// Service the second one exports, by its clusterset IP, and are answered by
// its pods.
func checkNodesReach(t *testing.T, ctx context.Context, l *labctl.Lab, placed map[*cluster.Cluster][]corev1.Pod) {
	t.Helper()
	a, b := l.Clusters[0], l.Clusters[1]
	for _, n := range l.Clusters {
		for _, node := range n.Nodes() {
			ns := nodeNS(t, node)
			if got := ns.MustRun(t, "sysctl", "-n", "net.ipv4.conf.all.rp_filter"); strings.TrimSpace(got) != "1" {
				t.Fatalf("node %s: net.ipv4.conf.all.rp_filter = %s, want 1 (strict)", node.Name(), got)
			}
		}
	}
	for _, pair := range [][2]*cluster.Cluster{{a, b}, {b, a}} {
		src, dst := pair[0], pair[1]
		seenAs := unknownSourceView(t, ctx, l, dst, src)
		hostPods := startHostPods(t, ctx, l, src)
		for _, to := range placed[dst] {
			ip, err := l.RemappedIP(ctx, src, dst, to.Status.PodIP)
			if err != nil {
				t.Fatal(err)
			}
			url := fmt.Sprintf("http://%s:%d/", ip, labctl.EchoPort)
			for _, node := range src.Nodes() {
				from := fmt.Sprintf("%s node %s", src.Name, node.Name())
				ns := nodeNS(t, node)
				checkNodeGet(t, ctx, from, seenAs, []string{to.Name}, func() (echoapi.Reply, error) {
					return hostGet(ctx, ns, url)
				})
			}
			for _, pod := range hostPods {
				from := fmt.Sprintf("%s host-network pod %s on %s", src.Name, pod.Name, pod.Spec.NodeName)
				checkNodeGet(t, ctx, from, seenAs, []string{to.Name}, func() (echoapi.Reply, error) {
					return podGet(ctx, l, src, pod.Name, url)
				})
			}
		}
	}

	// B exports its echo Service; A calls it by its clusterset IP from a
	// pod and from every node.
	ns := labctl.EchoNamespace
	kubectlOut(t, ctx, l, a, "label", "namespace", ns, mcs.ImportNamespaceLabel+"=true")
	export(t, ctx, l, b, ns, labctl.EchoDeployment)
	var ip string
	eventually(t, ctx, a.Name+" imports the echo Service of "+b.Name, func() error {
		ip = kubectlOut(t, ctx, l, a, "get", "serviceimports", "-n", ns, labctl.EchoDeployment, "--ignore-not-found", "-o", "jsonpath={.spec.ips[0]}")
		if ip == "" {
			return fmt.Errorf("no clusterset IP yet")
		}
		return nil
	})
	url := fmt.Sprintf("http://%s:%d/", ip, labctl.EchoPort)
	var behind []string
	for _, p := range echoPods(t, ctx, l, b) {
		behind = append(behind, p.Name)
	}
	pod := placed[a][1]
	wantPod, err := l.RemappedIP(ctx, b, a, pod.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	checkNodeGet(t, ctx, fmt.Sprintf("%s pod %s to clusterset IP", a.Name, pod.Name), wantPod, behind, func() (echoapi.Reply, error) {
		got, err := l.EchoGet(ctx, a, pod.Name, url)
		return got.Reply, err
	})
	seenAs := unknownSourceView(t, ctx, l, b, a)
	for _, node := range a.Nodes() {
		from := fmt.Sprintf("%s node %s to clusterset IP", a.Name, node.Name())
		ns := nodeNS(t, node)
		checkNodeGet(t, ctx, from, seenAs, behind, func() (echoapi.Reply, error) {
			return hostGet(ctx, ns, url)
		})
	}
}

// checkNodeGet retries get until a pod named in answerers answers it, and
// fails the test when that pod saw the caller at another address than want.
func checkNodeGet(t *testing.T, ctx context.Context, from string, want netip.Addr, answerers []string, get func() (echoapi.Reply, error)) {
	t.Helper()
	eventually(t, ctx, from+" reaches "+strings.Join(answerers, " or "), func() error {
		got, err := get()
		if err != nil {
			return err
		}
		if !slices.Contains(answerers, got.Pod) {
			return fmt.Errorf("answered by %s (%s), want %s", got.Pod, got.PodIP, strings.Join(answerers, " or "))
		}
		host, _, err := net.SplitHostPort(got.Client)
		if err != nil {
			return err
		}
		if host != want.String() {
			t.Errorf("%s: %s saw the caller as %s, want %s", from, got.Pod, host, want)
		}
		t.Logf("%s: answered by %s (%s), caller seen as %s", from, got.Pod, got.PodIP, got.Client)
		return nil
	})
}

// hostGet sends an HTTP GET to url from the host network of a node (its
// network namespace) and returns the echo server's reply.
func hostGet(ctx context.Context, ns *netns.NS, url string) (echoapi.Reply, error) {
	client := &http.Client{
		Timeout: 4 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			// The socket is made in the node's namespace and stays there.
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var conn net.Conn
				err := ns.Do(func() error {
					var err error
					conn, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
					return err
				})
				return conn, err
			},
		},
	}
	reply, err := httpjson.Get[echoapi.Reply](ctx, client, url, 64<<10)
	if err != nil {
		return reply, fmt.Errorf("from %s: %w", ns.Name, err)
	}
	return reply, nil
}

// hostPodPorts are the ports of the host-network echo pods: apart from the
// echo pods' own, which other tests' host-network servers might take.
var hostPodPorts = []string{"--http=:18080", "--sink=:19000", "--rr=:19001"}

// hostPodNamespace holds the host-network echo pods: the lab's clusters
// enforce the baseline Pod Security level, which refuses the host network,
// so their namespace allows it, as the namespace of a node agent does.
const hostPodNamespace = "host-echo"

// startHostPods starts a host-network echo pod on every node of n and
// returns them once they run.
func startHostPods(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster) []corev1.Pod {
	t.Helper()
	cs, err := n.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostPodNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, namespace, metav1.CreateOptions{}); err != nil {
		t.Fatalf("cluster %s: create namespace %s: %v", n.Name, hostPodNamespace, err)
	}
	var pods []corev1.Pod
	for i, node := range n.Nodes() {
		echo, err := l.EchoPods(ctx, n)
		if err != nil || len(echo) == 0 {
			t.Fatalf("cluster %s: no echo pod to copy: %v", n.Name, err)
		}
		spec := corev1.PodSpec{
			NodeName: node.Name(), HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "echo", Image: echo[0].Spec.Containers[0].Image, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: append([]string{"serve"}, hostPodPorts...),
			}},
		}
		name := fmt.Sprintf("host-%d", i+1)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hostPodNamespace}, Spec: spec}
		if _, err := cs.CoreV1().Pods(hostPodNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cluster %s: create host-network pod %s: %v", n.Name, name, err)
		}
	}
	for i := range n.Nodes() {
		name := fmt.Sprintf("host-%d", i+1)
		var pod *corev1.Pod
		eventually(t, ctx, fmt.Sprintf("%s: host-network pod %s running", n.Name, name), func() error {
			pod, err = cs.CoreV1().Pods(hostPodNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pod.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("phase %s", pod.Status.Phase)
			}
			return nil
		})
		pods = append(pods, *pod)
	}
	return pods
}

// podGet runs `echo get url` in a host-network echo pod of cluster n.
func podGet(ctx context.Context, l *labctl.Lab, n *cluster.Cluster, pod, url string) (echoapi.Reply, error) {
	var got echoapi.Got
	out, err := l.Kubectl(ctx, n, "-n", hostPodNamespace, "exec", pod, "--", "/echo", "get", "--timeout=2s", url)
	if err != nil {
		return got.Reply, err
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return got.Reply, fmt.Errorf("cluster %s: echo get %s: %w: %s", n.Name, url, err, out)
	}
	return got.Reply, nil
}

// unknownSourceView is the address under which cluster n sees the
// unknown-source address of peer (the first address of peer's external
// CIDR), from n's Configuration of peer.
func unknownSourceView(t *testing.T, ctx context.Context, l *labctl.Lab, n, peer *cluster.Cluster) netip.Addr {
	t.Helper()
	real, _ := externalView(t, ctx, l, n, peer)
	return externalAddrView(t, ctx, l, n, peer, real.Addr())
}

// externalAddrView is the address under which cluster n sees addr of
// peer's external CIDR.
func externalAddrView(t *testing.T, ctx context.Context, l *labctl.Lab, n, peer *cluster.Cluster, addr netip.Addr) netip.Addr {
	t.Helper()
	real, remapped := externalView(t, ctx, l, n, peer)
	view, err := cidr.Translate(addr, real, remapped)
	if err != nil {
		t.Fatal(err)
	}
	return view
}

// externalView is how cluster n sees peer's external CIDR: the real range
// and the one it is remapped to, from n's Configuration of peer.
func externalView(t *testing.T, ctx context.Context, l *labctl.Lab, n, peer *cluster.Cluster) (real, remapped netip.Prefix) {
	t.Helper()
	real, remapped, err := l.RangeView(ctx, n, peer, "external")
	if err != nil {
		t.Fatal(err)
	}
	return real, remapped
}
