package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// ControlPlaneComponents are the processes of the control plane, which runs
// on the first node, in start order.
func ControlPlaneComponents() []string {
	return []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
}

// NodeComponents are the processes of every node, in start order.
func NodeComponents() []string {
	return []string{"containerd", "kubelet", "kube-proxy"}
}

// commands are the command lines of the control-plane components.
func (n *Cluster) commands() map[string][]string {
	bin := func(name string) string { return filepath.Join(n.BinDir, name) }
	pki := func(name string) string { return n.path("pki", name) }
	// controller is the command line of a controller of the control plane
	// (kube-controller-manager, kube-scheduler): one kubeconfig for the API
	// and for delegated authentication and authorization, serving on the
	// loopback only, alone (no leader election).
	controller := func(name string, flags ...string) []string {
		kc := n.componentKubeconfig(name)
		return append([]string{bin(name),
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1",
			"--leader-elect=false",
			"--profiling=false",
			"--v=1",
		}, flags...)
	}
	controllerManager := []string{
		"--cert-dir=" + n.path("pki"),
		"--root-ca-file=" + pki("ca.crt"),
		"--service-account-private-key-file=" + pki("sa.key"),
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=" + Join(n.ServiceCIDRs()),
		// The node's spec.podCIDR is what node-local agents read;
		// a cluster that simulates a CNI with its own IPAM has none.
		"--allocate-node-cidrs=" + strconv.FormatBool(!n.NoNodePodCIDRs),
		"--cluster-cidr=" + Join(n.PodCIDRs()),
	}
	// kube-controller-manager refuses --node-cidr-mask-size beside a
	// second range, and the IPv4 size in an IPv6-only cluster.
	switch n.IPFamily {
	case DualStack:
		controllerManager = append(controllerManager, "--node-cidr-mask-size-ipv4="+strconv.Itoa(n.NodeMaskSize()),
			"--node-cidr-mask-size-ipv6="+strconv.Itoa(NodeMaskSize6))
	case IPv6:
		controllerManager = append(controllerManager, "--node-cidr-mask-size-ipv6="+strconv.Itoa(NodeMaskSize6))
	default:
		controllerManager = append(controllerManager, "--node-cidr-mask-size="+strconv.Itoa(n.NodeMaskSize()))
	}
	return map[string][]string{
		// A lab cluster's data is disposable; skipping fsync keeps two
		// clusters from stalling on a shared disk.
		"etcd": {bin("etcd"),
			"--name=" + n.Namespace(),
			"--data-dir=" + n.path("etcd"),
			"--listen-client-urls=http://127.0.0.1:2379",
			"--advertise-client-urls=http://127.0.0.1:2379",
			"--listen-peer-urls=http://127.0.0.1:2380",
			"--initial-advertise-peer-urls=http://127.0.0.1:2380",
			"--initial-cluster=" + n.Namespace() + "=http://127.0.0.1:2380",
			"--unsafe-no-fsync",
			"--log-level=warn",
		},
		"kube-apiserver": {bin("kube-apiserver"),
			"--etcd-servers=http://127.0.0.1:2379",
			"--advertise-address=" + n.AdvertiseIP().String(),
			"--secure-port=6443",
			"--tls-cert-file=" + pki("apiserver.crt"),
			"--tls-private-key-file=" + pki("apiserver.key"),
			"--client-ca-file=" + pki("ca.crt"),
			"--cert-dir=" + n.path("pki"),
			"--service-cluster-ip-range=" + Join(n.ServiceCIDRs()),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + pki("sa.pub"),
			"--service-account-signing-key-file=" + pki("sa.key"),
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction,PodSecurity",
			"--admission-control-config-file=" + n.path(admissionConfig),
			"--allow-privileged=true",
			"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
			// Node names do not resolve: reach kubelets by their address.
			"--kubelet-preferred-address-types=InternalIP,Hostname",
			"--profiling=false",
			"--v=1",
		},
		"kube-controller-manager": controller("kube-controller-manager", controllerManager...),
		"kube-scheduler":          controller("kube-scheduler"),
	}
}

// commands are the command lines of the node's components.
func (n *Node) commands() map[string][]string {
	bin := func(name string) string { return filepath.Join(n.Cluster.BinDir, name) }
	return map[string][]string{
		"containerd": {"containerd", "--config=" + n.path("containerd", "config.toml")},
		"kubelet": {bin("kubelet"),
			"--config=" + n.path("kubelet-config.yaml"),
			"--kubeconfig=" + n.Cluster.componentKubeconfig(n.kubeletIdentity()),
			"--root-dir=" + n.path(kubeletRoot),
			"--cert-dir=" + n.path(kubeletRoot, "pki"),
			"--hostname-override=" + n.Name(),
			"--node-ip=" + Join(n.IPs()),
			"--v=1",
		},
		"kube-proxy": {bin("kube-proxy"), "--config=" + n.path("kube-proxy-config.yaml"), "--v=1"},
	}
}

// Join lists addresses or ranges as the components' flags take them:
// comma-separated, the primary family first.
func Join[T fmt.Stringer](list []T) string {
	s := make([]string, len(list))
	for i, v := range list {
		s[i] = v.String()
	}
	return strings.Join(s, ",")
}

// watcher waits until ready reports true, failing fast with the log of a
// component that exited meanwhile.
type watcher func(ctx context.Context, what string, ready func(context.Context) (bool, error)) error

// Up writes the cluster's files and starts its components in the nodes'
// network namespaces, which must exist (CreateNetwork), then waits until
// every node is registered with its pod range (or, with NoNodePodCIDRs,
// takes the lab's) and, with the bridge CNI, sets up the pod network. Flannel's pod network needs its DaemonSet: the caller applies it
// and then calls Network. The processes keep running after Up returns.
func (n *Cluster) Up(ctx context.Context) error {
	nodes := n.Nodes()
	for _, node := range nodes {
		if err := node.configureNamespace(); err != nil {
			return err
		}
	}
	if err := n.writeFiles(); err != nil {
		return err
	}
	for _, node := range nodes {
		if err := node.makeCgroups(); err != nil {
			return err
		}
	}
	n.running = nil
	cs, err := n.Clientset()
	if err != nil {
		return err
	}
	if err := n.start("etcd", "kube-apiserver"); err != nil {
		return err
	}
	err = n.watch(ctx, "kube-apiserver", func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, err
	})
	if err != nil {
		return err
	}
	n.Logf("%s: kube-apiserver ready at %s", n.Name, n.APIServerURL())
	if err := n.start("kube-controller-manager", "kube-scheduler"); err != nil {
		return err
	}
	// The kubelet gives up at once when containerd's socket is not there
	// yet: every node's containerd answers before any kubelet starts.
	first, rest := NodeComponents()[:1], NodeComponents()[1:]
	if err := n.startOnNodes(first); err != nil {
		return err
	}
	for _, node := range nodes {
		err := n.watch(ctx, "node "+node.Name()+" containerd", func(context.Context) (bool, error) {
			conn, err := net.DialTimeout("unix", node.ContainerdSocket(), time.Second)
			if err != nil {
				return false, err
			}
			return true, conn.Close()
		})
		if err != nil {
			return err
		}
	}
	if err := n.startOnNodes(rest); err != nil {
		return err
	}
	var podCIDRs map[string][]netip.Prefix
	if n.NoNodePodCIDRs {
		podCIDRs = map[string][]netip.Prefix{}
		for name, r := range n.NodeRanges() {
			podCIDRs[name] = []netip.Prefix{r}
		}
	} else {
		var err error
		if podCIDRs, err = n.podCIDRs(ctx, n.watch); err != nil {
			return err
		}
	}
	for _, node := range nodes {
		n.Logf("%s: node %s at %s, pods %s", n.Name, node.Name(), Join(node.IPs()), Join(podCIDRs[node.Name()]))
	}
	if n.CNI == Bridge {
		return n.setUpBridge(podCIDRs)
	}
	return nil
}

// Network finishes a Flannel pod network once its DaemonSet runs: each
// node's CNI configuration from its lease. With the bridge CNI, Up did it.
func (n *Cluster) Network(ctx context.Context) error {
	if n.CNI != Flannel {
		return nil
	}
	return n.setUpFromFlannel(ctx, n.watch)
}

// WaitReady waits until every node is Ready and the default ServiceAccount
// exists: pods can run.
func (n *Cluster) WaitReady(ctx context.Context) error {
	cs, err := n.Clientset()
	if err != nil {
		return err
	}
	for _, node := range n.Nodes() {
		err := n.watch(ctx, "node "+node.Name()+" Ready", func(ctx context.Context) (bool, error) {
			ok, why := node.Ready(ctx)
			return ok, errors.New(why)
		})
		if err != nil {
			return err
		}
	}
	n.Logf("%s: %d nodes Ready", n.Name, n.NodeCount)
	return n.watch(ctx, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, err
		}
		return err == nil, err
	})
}

// start starts control-plane components and remembers them for watch.
func (n *Cluster) start(names ...string) error {
	return n.startWith(n.Start, names)
}

// startOnNodes starts node components on every node and remembers them for
// watch.
func (n *Cluster) startOnNodes(components []string) error {
	for _, node := range n.Nodes() {
		if err := n.startWith(node.Start, components); err != nil {
			return err
		}
	}
	return nil
}

// startWith starts components with start and remembers them for watch.
func (n *Cluster) startWith(start func(component string) (*proc.Process, error), components []string) error {
	for _, c := range components {
		p, err := start(c)
		if err != nil {
			return err
		}
		n.running = append(n.running, p)
	}
	return nil
}

// watch waits until ready reports true, failing fast, with the component's
// log, when a component started by Up exits.
func (n *Cluster) watch(ctx context.Context, what string, ready func(context.Context) (bool, error)) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		for _, p := range n.running {
			select {
			case <-p.Exited:
				return fmt.Errorf("cluster %s: waiting for %s: %w", n.Name, what, p.Failure())
			default:
			}
		}
		ok, err := ready(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s: waiting for %s: %w (last error: %v)", n.Name, what, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// Start starts one control-plane component in the first node's namespace.
// Up starts them all; Start alone restarts one that Stop ended.
func (n *Cluster) Start(component string) (*proc.Process, error) {
	argv, ok := n.commands()[component]
	if !ok {
		return nil, fmt.Errorf("cluster %s: no control-plane component %q", n.Name, component)
	}
	return startIn(n.Namespace(), n.Name+" "+component, argv, n.Log(component), n.PidFile(component))
}

// Start starts one component of the node in its namespace.
func (n *Node) Start(component string) (*proc.Process, error) {
	argv, ok := n.commands()[component]
	if !ok {
		return nil, fmt.Errorf("node %s: no component %q", n.Name(), component)
	}
	start := func() (*proc.Process, error) {
		return startIn(n.Namespace(), n.Name()+" "+component, argv, n.Log(component), n.PidFile(component))
	}
	if component == "kubelet" {
		return startKubelet(start)
	}
	return start()
}

// deviceManagerSocket is where every kubelet of the machine serves device
// plugins, whatever its --root-dir. A kubelet that starts removes the sockets
// there and then listens: two kubelets starting at that moment (two labs
// side by side) make one fail with "address already in use" and exit.
const deviceManagerSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"

// kubeletStartLock serialises that step across the labs of the machine, in
// one process or several.
const kubeletStartLock = "/run/lock/peerlink-lab-kubelet-start.lock"

// kubeletListenTimeout bounds how long a kubelet holds the others back.
const kubeletListenTimeout = time.Minute

// startKubelet starts a kubelet while no other lab's kubelet is starting:
// under a machine-wide lock it removes the device manager's socket, starts
// the kubelet and waits until the socket is back (this kubelet listens),
// the kubelet exits, or kubeletListenTimeout passes.
func startKubelet(start func() (*proc.Process, error)) (*proc.Process, error) {
	if err := os.MkdirAll(filepath.Dir(kubeletStartLock), 0o755); err != nil {
		return nil, fmt.Errorf("kubelet start lock: %w", err)
	}
	f, err := os.OpenFile(kubeletStartLock, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kubelet start lock: %w", err)
	}
	// Closing the file releases the lock.
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("kubelet start lock %s: %w", kubeletStartLock, err)
	}
	if err := os.Remove(deviceManagerSocket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("kubelet start: %w", err)
	}
	p, err := start()
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(kubeletListenTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if fi, err := os.Lstat(deviceManagerSocket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return p, nil
		}
		select {
		case <-p.Exited:
			// The caller's watch reports the exit with the kubelet's log.
			return p, nil
		case <-deadline.C:
			return p, nil
		case <-tick.C:
		}
	}
}

func startIn(namespace, name string, argv []string, log, pidFile string) (*proc.Process, error) {
	return proc.Start(proc.Spec{
		Name:    name,
		Argv:    argv,
		Netns:   namespace,
		Log:     log,
		PidFile: pidFile,
		Detach:  true,
	})
}

// Stop ends one control-plane component, as a crash or an upgrade would.
func (n *Cluster) Stop(component string) error {
	pid, err := proc.ReadPidFile(n.PidFile(component))
	if err != nil {
		return fmt.Errorf("cluster %s: stop %s: %w", n.Name, component, err)
	}
	if err := proc.Kill([]int{pid}, 5*time.Second); err != nil {
		return fmt.Errorf("cluster %s: stop %s: %w", n.Name, component, err)
	}
	return nil
}

// Fail stops the node the way a node that loses power looks to its
// cluster: its kubelet ends and its network goes (the host end of its link
// down). Its containers keep running, cut off from everything outside the
// node. The lab cannot bring it back; lab down removes it.
func (n *Node) Fail() error {
	pid, err := proc.ReadPidFile(n.PidFile("kubelet"))
	if err != nil {
		return fmt.Errorf("node %s: stop the kubelet: %w", n.Name(), err)
	}
	if err := proc.Kill([]int{pid}, 5*time.Second); err != nil {
		return fmt.Errorf("node %s: stop the kubelet: %w", n.Name(), err)
	}
	if out, err := runHost("ip", "link", "set", n.HostIf(), "down"); err != nil {
		return fmt.Errorf("node %s: take link %s down: %w: %s", n.Name(), n.HostIf(), err, out)
	}
	return nil
}

// Ready reports whether the node is Ready, and if not, why.
func (n *Node) Ready(ctx context.Context) (bool, string) {
	cs, err := n.Cluster.Clientset()
	if err != nil {
		return false, err.Error()
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, c.Message
		}
	}
	return false, "no Ready condition yet"
}

// Clientset is a client of the cluster as its admin.
func (n *Cluster) Clientset() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("cluster %s kubeconfig: %w", n.Name, err)
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s client: %w", n.Name, err)
	}
	return cs, nil
}

// makeCgroups creates the node's cgroup root in every cgroup v1
// hierarchy. The kubelet expects it to exist, and a new cpuset cgroup
// starts with no CPUs and no memory nodes, so those are copied from the
// parent.
func (n *Node) makeCgroups() error {
	roots, err := CgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range roots {
		if m.Version != 1 {
			continue
		}
		// Each level of a new cpuset cgroup starts empty: fill the
		// cluster's, then the node's, from the root's.
		for _, dir := range []string{filepath.Join(m.Path, CgroupName(n.Cluster.Index)), filepath.Join(m.Path, n.CgroupName())} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("node %s cgroup %s: %w", n.Name(), dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(m.Path, f))
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				if err != nil {
					return fmt.Errorf("node %s cgroup: %w", n.Name(), err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("node %s cgroup %s: %w", n.Name(), f, err)
				}
			}
		}
	}
	return nil
}

// CgroupMount is a mounted cgroup hierarchy.
type CgroupMount struct {
	Path    string
	Version int
}

// CgroupMounts lists the cgroup hierarchies mounted on the host.
func CgroupMounts() ([]CgroupMount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("list cgroup hierarchies: %w", err)
	}
	var out []CgroupMount
	for _, line := range strings.Split(string(b), "\n") {
		// The filesystem type is the first field after the " - " separator;
		// the mount point is the fifth field.
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(fs) == 0 {
			continue
		}
		switch fs[0] {
		case "cgroup":
			out = append(out, CgroupMount{Path: fields[4], Version: 1})
		case "cgroup2":
			out = append(out, CgroupMount{Path: fields[4], Version: 2})
		}
	}
	return out, nil
}
