package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/peerlink/peerlink/api"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

const (
	// benchPeers is the number of Configurations the control plane gets.
	benchPeers = 10_000
	// readyGoal is the ceiling of the time for all of them to be Ready.
	readyGoal = 60 * time.Second
	// memoryGoal is the ceiling of the controller's peak resident memory.
	memoryGoal = 300 << 20
	// restartGoal is the ceiling of the time a restarted controller takes
	// to serve a new peer while holding benchPeers.
	restartGoal = 5 * time.Second
	// flatFactor bounds the memory each peer of the last stage of
	// peerStages adds, as a multiple of what each of the stage before
	// added: a peer costs about as much whatever the number.
	flatFactor = 1.5
	// benchTimeout bounds each wait of the control-plane table.
	benchTimeout = 5 * time.Minute
	// creators is the number of goroutines creating Configurations.
	creators = 8
	// peersNamespace holds the Configurations the controller acts on;
	// directNamespace those of the floor, written before it starts.
	peersNamespace  = "peers"
	directNamespace = "direct"
)

// peerStages are the numbers of peers the controller holds, Ready, when
// its memory is read; the last is benchPeers.
var peerStages = []int{10, 100, 1000, benchPeers}

// controlPlaneTable runs `peerlink-agent controller` as a process of its own
// against a real kube-apiserver and etcd, gives it benchPeers Configurations
// that all collide with the local ranges, and measures the time until all
// are Ready and the controller's peak memory (VmHWM); then restarts it and
// measures how soon it serves a new peer.
func controlPlaneTable(ctx context.Context) (*table, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join("bin", "k8s", "current")
	}
	crds := filepath.Join("bundles", "install", "crds")
	for _, p := range []string{filepath.Join(assets, "kube-apiserver"), filepath.Join(assets, "etcd"), crds} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("control plane table: %w (run from the repository root after `make testbin`, or use `make bench`)", err)
		}
	}
	work, err := os.MkdirTemp("", "peerlink-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	agent := filepath.Join(work, "peerlink-agent")
	gobin := os.Getenv("GO")
	if gobin == "" {
		gobin = "go"
	}
	if out, err := exec.CommandContext(ctx, gobin, "build", "-o", agent, "./cmd/peerlink-agent").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build peerlink-agent: %w\n%s", err, out)
	}

	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	defer func() { _ = env.Stop() }()
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return nil, err
	}

	b, err := newControlPlaneBench(cfg, agent, kubeconfig, work)
	if err != nil {
		return nil, err
	}
	for _, ns := range []string{"peerlink", peersNamespace, directNamespace} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}

	// The floor: the same Configurations created, and a status like the
	// controller's written to each, by this client alone.
	start := time.Now()
	if err := b.createPeers(ctx, directNamespace, 0, benchPeers, b.writeStatus); err != nil {
		return nil, err
	}
	if err := b.waitReady(ctx, directNamespace, benchPeers); err != nil {
		return nil, err
	}
	direct := time.Since(start)
	if err := b.clear(ctx, directNamespace); err != nil {
		return nil, err
	}

	ctrlProc, err := b.startController(ctx)
	if err != nil {
		return nil, err
	}
	defer ctrlProc.stop()

	before, err := b.writes(ctx)
	if err != nil {
		return nil, err
	}
	// The peers come in stages, each Ready before the next starts, so
	// that the controller's memory at each is that of the peers it holds.
	start = time.Now()
	var created time.Duration
	resident := make([]int64, len(peerStages))
	from := 0
	for i, to := range peerStages {
		began := time.Now()
		if err := b.createPeers(ctx, peersNamespace, from, to, nil); err != nil {
			return nil, err
		}
		created += time.Since(began)
		if err := b.waitReady(ctx, peersNamespace, to); err != nil {
			return nil, fmt.Errorf("%w; controller log: %s", err, ctrlProc.logPath)
		}
		if resident[i], err = procBytes(ctrlProc.cmd.Process.Pid, "VmRSS"); err != nil {
			return nil, err
		}
		from = to
	}
	ready := time.Since(start)
	after, err := b.writes(ctx)
	if err != nil {
		return nil, err
	}
	hwm, err := procBytes(ctrlProc.cmd.Process.Pid, "VmHWM")
	if err != nil {
		return nil, err
	}
	cpu, err := cpuTime(ctrlProc.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	if err := b.checkRanges(ctx); err != nil {
		return nil, err
	}

	if err := ctrlProc.stop(); err != nil {
		return nil, fmt.Errorf("stop controller: %w", err)
	}
	start = time.Now()
	ctrlProc, err = b.startController(ctx)
	if err != nil {
		return nil, err
	}
	defer ctrlProc.stop()
	if err := b.createPeers(ctx, peersNamespace, benchPeers, benchPeers+1, nil); err != nil {
		return nil, err
	}
	if err := b.waitReady(ctx, peersNamespace, benchPeers+1); err != nil {
		return nil, fmt.Errorf("after restart: %w; controller log: %s", err, ctrlProc.logPath)
	}
	restart := time.Since(start)
	if err := b.checkRanges(ctx); err != nil {
		return nil, fmt.Errorf("after restart: %w", err)
	}

	return &table{
		title: fmt.Sprintf("Control plane (peerlink-agent controller as a process, real kube-apiserver, %s peers)", number(benchPeers)),
		rows: []row{
			{name: fmt.Sprintf("%s Configurations created to all Ready", number(benchPeers)), measured: ready.Seconds(), goal: readyGoal.Seconds(), unit: "s", dir: atMost},
			{name: "controller peak memory (VmHWM)", measured: float64(hwm) / (1 << 20), goal: memoryGoal / (1 << 20), unit: "MiB", dir: atMost},
			{name: "controller restart to a new peer Ready", measured: restart.Seconds(), goal: restartGoal.Seconds(), unit: "s", dir: atMost},
			{name: fmt.Sprintf("controller memory per peer, %s -> %s peers (ceiling: %.1f x that of %s -> %s)", number(float64(peerStages[2])), number(float64(peerStages[3])), flatFactor,
				number(float64(peerStages[1])), number(float64(peerStages[2]))), measured: perPeer(resident, 3) / (1 << 10), goal: flatFactor * perPeer(resident, 2) / (1 << 10), unit: "KiB", dir: atMost},
		},
		notes: []string{
			"every peer declares pod 10.244.0.0/24 and external 10.70.0.0/24, both colliding with the local ranges",
			"the restart includes the process start, the cache sync, the rebuild of the IPAM from status and a pass over every peer",
			fmt.Sprintf("the API server's floor: the same %s Configurations created, and a status like the controller's written to each (2 writes per peer), by the bench's client alone at the same parallelism (%d), no controller running: %.1f s, so all Ready took %.2f times the floor; with the controller running, the creates alone took %.1f s",
				number(benchPeers), creators, direct.Seconds(), ready.Seconds()/direct.Seconds(), created.Seconds()),
			fmt.Sprintf("the controller's CPU time from its start to all Ready: %.1f s", cpu.Seconds()),
			fmt.Sprintf("the peers come in stages of %s, each Ready before the next is created (the time to all Ready includes the waits); the controller's resident memory (VmRSS) then: %s",
				stagesText(), residentText(resident)),
			"writes the API server took per peer while the controller made them Ready (the bench's create included): " + writesPerPeer(before, after) +
				"; all peers are in one namespace, so they share one exports ConfigMap, where each peer has its own in a cluster",
		},
	}, nil
}

// controlPlaneBench drives one control plane.
type controlPlaneBench struct {
	c          client.WithWatch
	rest       rest.Interface
	agent      string
	kubeconfig string
	dir        string
	facts      []string
	runs       int
}

func newControlPlaneBench(cfg *rest.Config, agent, kubeconfig, dir string) (*controlPlaneBench, error) {
	cfg = rest.CopyConfig(cfg)
	// No client-side rate limit: the bench must not be what is measured.
	cfg.QPS = -1
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create clientset: %w", err)
	}
	return &controlPlaneBench{
		c: c, rest: cs.CoreV1().RESTClient(), agent: agent, kubeconfig: kubeconfig, dir: dir,
		facts: []string{"--cluster-id=bench-local", "--pod-cidr=10.244.0.0/16", "--service-cidr=10.96.0.0/12", "--namespace=peerlink"},
	}, nil
}

// controllerProcess is a running `peerlink-agent controller`.
type controllerProcess struct {
	cmd     *exec.Cmd
	logPath string
	once    sync.Once
	err     error
}

// stop sends SIGTERM and waits for the process to exit.
func (p *controllerProcess) stop() error {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.err = p.cmd.Wait()
	})
	return p.err
}

// startController starts the controller and waits until it has published
// its cluster-info ConfigMap, a sign that it runs.
func (b *controlPlaneBench) startController(ctx context.Context) (*controllerProcess, error) {
	b.runs++
	logPath := filepath.Join(b.dir, fmt.Sprintf("controller-%d.log", b.runs))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	args := append([]string{"controller", "--kubeconfig=" + b.kubeconfig,
		"--metrics-bind-address=0", "--health-probe-bind-address=0"}, b.facts...)
	cmd := exec.Command(b.agent, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start controller: %w", err)
	}
	p := &controllerProcess{cmd: cmd, logPath: logPath}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, benchTimeout, true, func(ctx context.Context) (bool, error) {
		var cm corev1.ConfigMap
		return b.c.Get(ctx, types.NamespacedName{Namespace: "peerlink", Name: clusterinfo.Name}, &cm) == nil, nil
	})
	if err != nil {
		_ = p.stop()
		return nil, fmt.Errorf("controller did not publish %s: %w (log: %s)", clusterinfo.Name, err, tailFile(logPath, 20))
	}
	return p, nil
}

// createPeers creates in ns the Configurations of peers from to to-1, and
// runs then on each when it is not nil.
func (b *controlPlaneBench) createPeers(ctx context.Context, ns string, from, to int, then func(context.Context, *netv1beta1.Configuration, int) error) error {
	next := make(chan int)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	for range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id := fmt.Sprintf("peer-%04d", i)
				conf := &netv1beta1.Configuration{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id,
						Labels: map[string]string{netv1beta1.RemoteClusterIDLabel: id}},
					Spec: netv1beta1.ConfigurationSpec{Remote: netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{
						Pod: []netv1beta1.CIDR{"10.244.0.0/24"}, External: []netv1beta1.CIDR{"10.70.0.0/24"},
					}}},
				}
				if err := b.c.Create(ctx, conf); err != nil {
					errs <- fmt.Errorf("create configuration %s: %w", id, err)
					return
				}
				if then != nil {
					if err := then(ctx, conf, i); err != nil {
						errs <- fmt.Errorf("configuration %s: %w", id, err)
						return
					}
				}
			}
		}()
	}
	var err error
feed:
	for i := from; i < to; i++ {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err = <-errs:
		return err
	default:
		return nil
	}
}

// writeStatus writes the status the controller would: peer i's ranges
// remapped into 10.0.0.0/8, Ready for the object's generation.
func (b *controlPlaneBench) writeStatus(ctx context.Context, conf *netv1beta1.Configuration, i int) error {
	pod := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 7), byte(i&127) << 1, 0}), 24)
	ext := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 7), byte(i&127)<<1 | 1, 0}), 24)
	conf.Status = netv1beta1.ConfigurationStatus{
		CommonStatus: netv1beta1.CommonStatus{ObservedGeneration: conf.Generation, Conditions: []metav1.Condition{{
			Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: conf.Generation,
			LastTransitionTime: metav1.Now(), Reason: "Remapped", Message: "the peer's ranges are remapped",
		}}},
		Remote: &netv1beta1.ClusterConfig{CIDR: netv1beta1.ClusterConfigCIDR{
			Pod: []netv1beta1.CIDR{netv1beta1.CIDR(pod.String())}, External: []netv1beta1.CIDR{netv1beta1.CIDR(ext.String())},
		}},
	}
	return b.c.Status().Update(ctx, conf)
}

// waitReady waits until n Configurations of ns are Ready for their
// generation, as kstatus reads them. It follows a watch, so that the count
// loads the API server no more than the objects' changes do.
func (b *controlPlaneBench) waitReady(ctx context.Context, ns string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, benchTimeout)
	defer cancel()
	ready := map[string]bool{}
	count := func() int {
		c := 0
		for _, r := range ready {
			if r {
				c++
			}
		}
		return c
	}
	for {
		var list netv1beta1.ConfigurationList
		if err := b.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("%d of %d configurations ready: %w", count(), n, err)
		}
		for i := range list.Items {
			if err := b.track(ready, &list.Items[i]); err != nil {
				return err
			}
		}
		if count() >= n {
			return nil
		}
		w, err := b.c.Watch(ctx, &netv1beta1.ConfigurationList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			return fmt.Errorf("%d of %d configurations ready: %w", count(), n, err)
		}
		for ev := range w.ResultChan() {
			conf, ok := ev.Object.(*netv1beta1.Configuration)
			if !ok {
				// An error event: list again and watch from there.
				break
			}
			if err := b.track(ready, conf); err != nil {
				w.Stop()
				return err
			}
			if count() >= n {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d configurations ready: %w", count(), n, ctx.Err())
		}
	}
}

// track records in ready whether conf is Ready for its generation.
func (b *controlPlaneBench) track(ready map[string]bool, conf *netv1beta1.Configuration) error {
	r, _, err := testcluster.Current(b.c.Scheme(), conf)
	ready[conf.Name] = r
	return err
}

// clear deletes every Configuration of ns and waits until they are gone.
func (b *controlPlaneBench) clear(ctx context.Context, ns string) error {
	if err := b.c.DeleteAllOf(ctx, &netv1beta1.Configuration{}, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("delete the configurations of %s: %w", ns, err)
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, benchTimeout, true, func(ctx context.Context) (bool, error) {
		var list metav1.PartialObjectMetadataList
		list.SetGroupVersionKind(netv1beta1.GroupVersion.WithKind("ConfigurationList"))
		if err := b.c.List(ctx, &list, client.InNamespace(ns), client.Limit(1)); err != nil {
			return false, nil
		}
		return len(list.Items) == 0, nil
	})
}

// checkRanges checks that the ranges in status overlap neither each other
// nor the local ranges: a fast wrong answer is not a result.
func (b *controlPlaneBench) checkRanges(ctx context.Context) error {
	var list netv1beta1.ConfigurationList
	if err := b.c.List(ctx, &list); err != nil {
		return err
	}
	ranges := []netip.Prefix{
		netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/12"),
		netip.MustParsePrefix("10.70.0.0/16"), netip.MustParsePrefix("10.80.0.0/16"),
	}
	for _, c := range list.Items {
		if c.Status.Remote == nil {
			return fmt.Errorf("configuration %s has no status.remote", c.Name)
		}
		for _, s := range append(c.Status.Remote.CIDR.Pod, c.Status.Remote.CIDR.External...) {
			p, err := cidr.ParseNetwork(string(s))
			if err != nil {
				return fmt.Errorf("configuration %s: status.remote: %w", c.Name, err)
			}
			ranges = append(ranges, p)
		}
	}
	if i, j, ok := cidr.FirstOverlap(ranges); ok {
		return fmt.Errorf("ranges %s and %s overlap", ranges[i], ranges[j])
	}
	return nil
}

// writes returns the API server's count of the write requests it served,
// by verb, resource and subresource (apiserver_request_total).
func (b *controlPlaneBench) writes(ctx context.Context) (map[string]float64, error) {
	raw, err := b.rest.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
			key := labels["verb"] + " " + labels["resource"]
			if sub := labels["subresource"]; sub != "" {
				key += "/" + sub
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

// writesPerPeer says, from two counts of writes, how many of each kind
// there were per peer, most first.
func writesPerPeer(before, after map[string]float64) string {
	type kind struct {
		name string
		per  float64
	}
	var kinds []kind
	total := 0.0
	for k, v := range after {
		if d := (v - before[k]) / benchPeers; d >= 0.01 {
			kinds = append(kinds, kind{k, d})
			total += d
		}
	}
	slices.SortFunc(kinds, func(x, y kind) int { return cmp.Compare(y.per, x.per) })
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%.2f %s", k.per, k.name)
	}
	return fmt.Sprintf("%.2f (%s)", total, strings.Join(parts, ", "))
}

// procBytes returns a memory figure of a process's /proc status, in bytes:
// VmHWM its peak resident memory, VmRSS its resident memory now.
func procBytes(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", field, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s %q: %w", field, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.Join(sc.Err(), fmt.Errorf("no %s in /proc status", field))
}

// perPeer is the memory each peer of stage i added, in bytes: the growth
// from stage i-1 over the peers between them.
func perPeer(resident []int64, i int) float64 {
	return float64(resident[i]-resident[i-1]) / float64(peerStages[i]-peerStages[i-1])
}

// stagesText lists peerStages.
func stagesText() string {
	parts := make([]string, len(peerStages))
	for i, n := range peerStages {
		parts[i] = number(float64(n))
	}
	return strings.Join(parts, ", ")
}

// residentText gives the memory at each stage, and what each peer of it
// added.
func residentText(resident []int64) string {
	parts := make([]string, len(resident))
	for i, r := range resident {
		parts[i] = fmt.Sprintf("%s peers %.0f MiB", number(float64(peerStages[i])), float64(r)/(1<<20))
		if i > 0 {
			parts[i] += fmt.Sprintf(" (%.1f KiB per peer since %s)", perPeer(resident, i)/(1<<10), number(float64(peerStages[i-1])))
		}
	}
	return strings.Join(parts, ", ")
}

// cpuTime returns the CPU time a process has used, user and system.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	// The fields after the command's name, which is in parentheses and
	// may hold spaces: utime and stime are the 12th and 13th of them.
	_, rest, ok := strings.Cut(string(data), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return 0, fmt.Errorf("read CPU time: /proc/%d/stat: %q", pid, data)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read CPU time: /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	// The kernel counts them in USER_HZ, 100 a second on Linux.
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
