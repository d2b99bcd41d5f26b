package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
)

// TestLabIPFamilies brings up an IPv6-only and then a dual-stack cluster of
// two nodes (without peerlink) and checks what makes them so: every Node
// has a pod range and an InternalIP of each family of the cluster and of no
// other, a pod gets an address of each family, a pod on one node reaches a
// pod on the other over each family and is seen by its own address (no
// masquerade inside the cluster), and an IPv6 Service has a ClusterIP of
// the cluster's IPv6 service range that reaches its pods, also by its name,
// which the cluster DNS can only answer with an AAAA record.
func TestLabIPFamilies(t *testing.T) {
	sideBySide(t)
	for _, family := range []cluster.IPFamily{cluster.IPv6, cluster.DualStack} {
		t.Run(string(family), func(t *testing.T) {
			start := time.Now()
			ctx, l := newLabWith(t, 8*time.Minute, labctl.Options{
				Names: []string{"fam-" + string(family)}, Nodes: 2, IPFamilies: []cluster.IPFamily{family}, SkipInstall: true,
			})
			n := l.Clusters[0]
			t.Logf("%s cluster of %d nodes up in %.1fs", family, n.NodeCount, time.Since(start).Seconds())
			want := []bool{false} // the families' Is6, the primary first
			switch family {
			case cluster.IPv6:
				want = []bool{true}
			case cluster.DualStack:
				want = []bool{false, true}
			}
			cs, err := n.Clientset()
			if err != nil {
				t.Fatal(err)
			}
			nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, node := range nodes.Items {
				var internal []string
				for _, a := range node.Status.Addresses {
					if a.Type == corev1.NodeInternalIP {
						internal = append(internal, a.Address)
					}
				}
				checkFamilies(t, "node "+node.Name+" spec.podCIDRs", node.Spec.PodCIDRs, want)
				checkFamilies(t, "node "+node.Name+" InternalIPs", internal, want)
			}

			// One pod on each node, by name: the Deployment's replicas may
			// share a node.
			var pods []*corev1.Pod
			for _, node := range n.Nodes() {
				pod := startEchoPod(t, ctx, l, n, "on-"+node.Name(), node.Name())
				var ips []string
				for _, ip := range pod.Status.PodIPs {
					ips = append(ips, ip.IP)
				}
				checkFamilies(t, "pod "+pod.Name+" podIPs", ips, want)
				t.Logf("pod %s on %s at %s", pod.Name, pod.Spec.NodeName, strings.Join(ips, ", "))
				pods = append(pods, pod)
			}
			from, to := pods[0], pods[1]
			for i := range want {
				dst, src := to.Status.PodIPs[i].IP, from.Status.PodIPs[i].IP
				checkGet(t, ctx, l, n, from.Name, "http://"+net.JoinHostPort(dst, "8080")+"/", to.Name, src)
			}

			// An IPv6-only Service of the echo Deployment: its ClusterIP
			// goes through kube-proxy's IPv6 rules (ip6tables) to a pod of
			// either node, and its name has no A record to fall back on.
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "echo-v6", Namespace: labctl.EchoNamespace},
				Spec: corev1.ServiceSpec{
					Selector:       map[string]string{"app": labctl.EchoDeployment},
					IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack),
					IPFamilies:     []corev1.IPFamily{corev1.IPv6Protocol},
					Ports:          []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt(labctl.EchoPort)}},
				},
			}
			if svc, err = cs.CoreV1().Services(labctl.EchoNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			checkFamilies(t, "Service "+svc.Name+" clusterIPs", svc.Spec.ClusterIPs, []bool{true})
			ip := svc.Spec.ClusterIP
			if !n.ServiceCIDR6.Contains(netip.MustParseAddr(ip)) {
				t.Errorf("Service %s ClusterIP %s, outside the cluster's IPv6 service range %s", svc.Name, ip, n.ServiceCIDR6)
			}
			checkGet(t, ctx, l, n, from.Name, "http://"+net.JoinHostPort(ip, "80")+"/", labctl.EchoDeployment+"-", "")
			name := fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, cluster.ClusterDomain)
			checkGet(t, ctx, l, n, from.Name, "http://"+name+"/", labctl.EchoDeployment+"-", "")
		})
	}
}

// checkFamilies fails the test unless addrs (addresses or ranges) are one
// of each family of want, in its order.
func checkFamilies(t *testing.T, what string, addrs []string, want []bool) {
	t.Helper()
	var got []bool
	for _, s := range addrs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			p, perr := netip.ParsePrefix(s)
			if perr != nil {
				t.Errorf("%s: %q is neither an address nor a range", what, s)
				continue
			}
			a = p.Addr()
		}
		got = append(got, a.Is6() && !a.Is4In6())
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s %q: IPv6 %v, want %v", what, addrs, got, want)
	}
}

// checkGet waits until pod from of cluster n gets url answered by a pod
// whose name starts with by and, when client is set, sees the caller at
// that address.
func checkGet(t *testing.T, ctx context.Context, l *labctl.Lab, n *cluster.Cluster, from, url, by, client string) {
	t.Helper()
	eventually(t, ctx, from+" gets "+url, func() error {
		got, err := l.EchoGet(ctx, n, from, url)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(got.Reply.Pod, by) {
			return fmt.Errorf("answered by %s, want %s", got.Reply.Pod, by)
		}
		if client != "" {
			host, _, err := net.SplitHostPort(got.Reply.Client)
			if err != nil {
				return err
			}
			if host != client {
				return fmt.Errorf("%s saw the caller as %s, want %s", got.Reply.Pod, host, client)
			}
		}
		t.Logf("%s -> %s: answered by %s, caller seen as %s", from, url, got.Reply.Pod, got.Reply.Client)
		return nil
	})
}
