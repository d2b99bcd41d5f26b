package labctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/peerlink/peerlink/internal/image"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/images"
	"github.com/peerlink/peerlink/lab/internal/sweep"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// DefaultDir is where the lab keeps its state unless told otherwise.
const DefaultDir = "/var/lib/peerlink-lab"

// registryPort is the lab registry's port on the first cluster's host
// address.
const registryPort = 5000

// Options configure Up.
type Options struct {
	// Dir holds everything the lab makes; an existing lab there is removed
	// first.
	Dir string
	// Names name the clusters, one per cluster, and their nodes. They are
	// not peerlink's cluster IDs, which peerlink detects (Cluster.ClusterID).
	Names []string
	// FirstIndex numbers the first cluster (namespace c<FirstIndex>); the
	// others follow. 0 takes the first indices no other lab uses, from 11
	// on, so that labs for tests run beside the one of `make lab`.
	FirstIndex int
	// Repo is the root of the peerlink repository.
	Repo string
	// Out receives progress lines and the output of the setup scripts.
	Out io.Writer
	// Nodes is the number of nodes of every cluster; 0 means 1.
	Nodes int
	// CNI is every cluster's pod network; empty means the bridge.
	CNI cluster.CNI
	// ProxyMode is kube-proxy's mode on every node; empty means iptables.
	ProxyMode cluster.ProxyMode
	// KubernetesMinor is the minor release every cluster runs, "1.N", one
	// hack/testbin.sh has a pin for; empty means the default release
	// (hack/kube).
	KubernetesMinor string
	// NoNodePodCIDRs leaves every cluster's Nodes without spec.podCIDRs,
	// as a CNI with its own IPAM does (cluster.Cluster.NoNodePodCIDRs);
	// the bridge CNI only.
	NoNodePodCIDRs bool
	// PodCIDRs are the clusters' pod ranges: one for every cluster, or one
	// per cluster; none means cluster.DefaultPodCIDR.
	PodCIDRs []netip.Prefix
	// ServiceCIDRs are the clusters' service ranges, given like PodCIDRs.
	ServiceCIDRs []netip.Prefix
	// IPFamilies are the families of the clusters' Nodes, pods and
	// Services, given like PodCIDRs (one for every cluster, or one per
	// cluster, as a dual-stack cluster peered with an IPv4-only one needs);
	// none means IPv4. PodCIDRs and ServiceCIDRs then go to the clusters
	// with IPv4, PodCIDRs6 to those with IPv6.
	IPFamilies []cluster.IPFamily
	// PodCIDRs6 are the clusters' IPv6 pod ranges (IPv6 and dual-stack
	// clusters), given like PodCIDRs. None follows the layout of the IPv4
	// ones: clusters that share an IPv4 range (PodCIDRs none or one) share
	// cluster.DefaultPodCIDR6, clusters with one each get distinct ones
	// (cluster.PodCIDR6Of).
	PodCIDRs6 []netip.Prefix
	// Flux installs Flux's source-controller and kustomize-controller in
	// every cluster.
	Flux bool
	// SkipInstall leaves peerlink out of the clusters, for a test that
	// installs it its own way and then calls WaitInstalled.
	SkipInstall bool
	// ImportAllNamespaces lets every namespace of every cluster take the
	// services peers export (IMPORT_NAMESPACES=*), as a Multi-Cluster
	// Services conformance run needs; off, namespaces opt in.
	ImportAllNamespaces bool
	// RoutedPeerCIDRs is the address plan for peers every cluster's
	// controller is given (ROUTED_PEER_CIDRS): a peer's pod range inside it
	// is routed as it is when it collides with nothing. None: every peer
	// range is remapped, the controller's default.
	RoutedPeerCIDRs []netip.Prefix
	// Installers say how Up installs peerlink, given like PodCIDRs; none
	// means Kustomize.
	Installers []Installer
	// LoadBalancer is installed in every cluster, with a pool of
	// addresses of its node network; none leaves Services of type
	// LoadBalancer pending, and the lab peers through NodePorts.
	LoadBalancer LoadBalancer
	// Previous, when set, is a release Up installs instead of the lab's
	// own tree, its agent image published beside the tree's; Upgrade
	// then installs the tree's own, and Downgrade the previous again.
	Previous *Release
}

// Lab is a running lab.
type Lab struct {
	Dir      string
	State    State
	Clusters []*cluster.Cluster
	// KubectlBin is the kubectl binary built with the cluster components.
	KubectlBin string
	progress   *Progress
	// flux says whether Up installs the Flux controllers.
	flux bool
	// skipInstall says whether Up leaves peerlink out; importAll whether
	// it installs it with imports allowed in every namespace.
	skipInstall, importAll bool
	// routedPeer is the address plan for peers Up installs peerlink with.
	routedPeer []netip.Prefix
	// previous is the release Up installs instead of the tree's own.
	previous *Release
	// mu guards State while clusters come up side by side.
	mu sync.Mutex
}

// Progress prints lines prefixed with the time elapsed since it was made.
type Progress struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

// NewProgress starts the clock.
func NewProgress(out io.Writer) *Progress {
	return &Progress{out: out, start: time.Now()}
}

// Logf prints one progress line.
func (p *Progress) Logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// Elapsed is the time since the progress started.
func (p *Progress) Elapsed() time.Duration { return time.Since(p.start) }

// kubernetesMinor is the form of Options.KubernetesMinor: 1.N.
var kubernetesMinor = regexp.MustCompile(`^1\.[0-9]+$`)

// Up builds everything the lab needs and brings up its clusters, each with
// the echo server and peerlink installed.
func Up(ctx context.Context, o Options) (*Lab, error) {
	p := NewProgress(o.Out)
	if err := o.validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(o.Dir, stateFile)); err == nil {
		p.Logf("removing the previous lab in %s", o.Dir)
		if err := Down(o.Dir, o.Out); err != nil {
			return nil, err
		}
	}
	if err := runScript(ctx, o.Out, o.Repo, "hack/install-deps.sh"); err != nil {
		return nil, err
	}
	p.Logf("Debian packages present")
	l, err := o.claim(p)
	if err != nil {
		return nil, err
	}
	p.Logf("network namespaces %s ready", strings.Join(l.namespaces(), ", "))

	var testbinArgs []string
	link := "current"
	if o.KubernetesMinor != "" {
		testbinArgs, link = []string{"--minor", o.KubernetesMinor}, "v"+o.KubernetesMinor
	}
	testbinArgs = append(testbinArgs, "kube-apiserver", "kube-controller-manager", "kubectl", "etcd", "kube-scheduler", "kubelet", "kube-proxy")
	if err := runScript(ctx, o.Out, o.Repo, "hack/testbin.sh", testbinArgs...); err != nil {
		return nil, err
	}
	binDir, err := filepath.EvalSymlinks(filepath.Join(o.Repo, "bin", "k8s", link))
	if err != nil {
		return nil, fmt.Errorf("kubernetes binaries: %w", err)
	}
	l.KubectlBin = filepath.Join(binDir, "kubectl")
	l.mu.Lock()
	l.State.Kubernetes = filepath.Base(binDir)
	err = writeState(o.Dir, l.State)
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	p.Logf("Kubernetes %s binaries present in %s", l.State.Kubernetes, binDir)

	stamp, err := image.GitStamp(ctx, o.Repo, "")
	if err != nil {
		return nil, err
	}
	bins := images.Binaries(cluster.PauseImage)
	if err := images.Build(ctx, o.Repo, l.path("bin"), bins); err != nil {
		return nil, err
	}
	if err := images.BuildCLI(ctx, o.Repo, l.path("bin"), stamp); err != nil {
		return nil, err
	}
	p.Logf("built peerlink (version %s), echo, pause and registry", stamp.Version)

	for _, n := range l.Clusters {
		n.BinDir = binDir
	}

	reg := images.Registry{
		Binary:  l.path("bin", "registry"),
		Addr:    l.State.Registry,
		Dir:     l.path("registry"),
		Log:     l.path("registry.log"),
		PidFile: l.path("registry.pid"),
	}
	if err := reg.Start(ctx); err != nil {
		return nil, err
	}
	if err := images.Publish(ctx, l.State.Registry, l.path("bin"), bins); err != nil {
		return nil, err
	}
	if err := images.PublishAgent(ctx, o.Repo, l.path("bin"), l.State.Registry, images.AgentImage, stamp); err != nil {
		return nil, err
	}
	p.Logf("registry on %s serves %s (version %s, built as make images does, for this machine), %s and %s",
		l.State.Registry, images.AgentImage, stamp.Version, images.EchoImage(l.State.Registry), cluster.PauseImage)
	l.flux, l.skipInstall, l.importAll = o.Flux, o.SkipInstall, o.ImportAllNamespaces
	if l.previous = o.Previous; l.previous != nil {
		if err := l.publishPrevious(ctx); err != nil {
			return nil, err
		}
	}
	l.routedPeer = o.RoutedPeerCIDRs
	if err := l.publishComponents(ctx, o.Out); err != nil {
		return nil, err
	}
	if slices.Contains(o.Installers, Helm) {
		if err := runScript(ctx, o.Out, o.Repo, "hack/components.sh", "helm"); err != nil {
			return nil, err
		}
	}

	l.printTopology(p)
	g, gctx := errgroup.WithContext(ctx)
	for k, n := range l.Clusters {
		g.Go(func() error {
			start := time.Now()
			if err := l.bringUp(gctx, n); err != nil {
				return err
			}
			p.Logf("%s: cluster up in %.1fs (kubeconfig %s)", n.Name, time.Since(start).Seconds(), n.Kubeconfig())
			return l.install(gctx, n, pick(o.Installers, k, Kustomize))
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := l.writeKubeconfig(); err != nil {
		return nil, err
	}
	p.Logf("lab up: %d clusters; one kubeconfig with a context per cluster: %s", len(l.Clusters), l.Kubeconfig())
	return l, nil
}

// claim takes cluster indices no other lab uses (o.FirstIndex on, or the
// first free block from autoFirstIndex when it is 0), records them, and
// creates their network namespaces, all under the host lock: labs started
// at the same time (a test run beside `make lab`) never share an index,
// and a lab only ever records, and so removes, namespaces it made.
func (o *Options) claim(p *Progress) (*Lab, error) {
	unlock, err := lockHost()
	if err != nil {
		return nil, err
	}
	defer unlock()
	first := o.FirstIndex
	if first == 0 {
		if first, err = freeIndices(autoFirstIndex, len(o.Names)); err != nil {
			return nil, err
		}
	} else if taken := takenIndex(first, len(o.Names)); taken != 0 {
		return nil, fmt.Errorf("cluster index %d (network namespace %s) is in use by another lab: take that one down first, or use another directory and index",
			taken, cluster.Namespace(taken))
	}
	l := &Lab{Dir: o.Dir, progress: p, State: State{
		Repo:         o.Repo,
		Registry:     fmt.Sprintf("%s:%d", cluster.HostIP(first), registryPort),
		LoadBalancer: o.LoadBalancer,
	}}
	for k, name := range o.Names {
		n := &cluster.Cluster{
			Index:          first + k,
			Name:           name,
			NodeCount:      max(o.Nodes, 1),
			IPFamily:       o.family(k),
			CNI:            cmp.Or(o.CNI, cluster.Bridge),
			ProxyMode:      cmp.Or(o.ProxyMode, cluster.IPTables),
			NoNodePodCIDRs: o.NoNodePodCIDRs,
			Registry:       l.State.Registry,
			Mirrored:       images.Mirrored(),
			Logf:           p.Logf,
		}
		if n.IPFamily.HasIPv4() {
			n.PodCIDR = pick(o.PodCIDRs, k, cluster.DefaultPodCIDR)
			n.ServiceCIDR = pick(o.ServiceCIDRs, k, cluster.DefaultServiceCIDR)
		}
		if n.IPFamily.HasIPv6() {
			n.PodCIDR6 = pick(o.PodCIDRs6, k, o.defaultPodCIDR6(n.Index))
			n.ServiceCIDR6 = cluster.ServiceCIDR6Of(n.Index)
		}
		n.Dir = filepath.Join(o.Dir, n.Namespace())
		l.Clusters = append(l.Clusters, n)
		l.State.Clusters = append(l.State.Clusters, recordOf(n))
	}
	if err := claimHost(); err != nil {
		return nil, err
	}
	// Recorded before anything is created: from here on, Down knows what
	// to remove.
	if err := writeState(o.Dir, l.State); err != nil {
		return nil, err
	}
	for _, n := range l.Clusters {
		if err := n.CreateNetwork(); err != nil {
			return nil, err
		}
	}
	// The host routes between the clusters' veths.
	if err := netns.WriteSysctl("net/ipv4/ip_forward", "1"); err != nil {
		return nil, err
	}
	if o.anyFamily(cluster.IPFamily.HasIPv6) {
		if err := netns.WriteSysctl("net/ipv6/conf/all/forwarding", "1"); err != nil {
			return nil, err
		}
	}
	if err := raiseInotifyLimits(); err != nil {
		return nil, err
	}
	return l, nil
}

// family is the IP family of cluster k.
func (o *Options) family(k int) cluster.IPFamily {
	return pick(o.IPFamilies, k, cluster.IPv4)
}

// anyFamily tells whether the family of some cluster has has.
func (o *Options) anyFamily(has func(cluster.IPFamily) bool) bool {
	for k := range o.Names {
		if has(o.family(k)) {
			return true
		}
	}
	return false
}

// allFamilies tells whether the family of every cluster has has.
func (o *Options) allFamilies(has func(cluster.IPFamily) bool) bool {
	return !o.anyFamily(func(f cluster.IPFamily) bool { return !has(f) })
}

// defaultPodCIDR6 is the IPv6 pod range of cluster index i when none is
// given: the IPv6 layout follows the IPv4 one (see Options.PodCIDRs6).
func (o *Options) defaultPodCIDR6(i int) netip.Prefix {
	if len(o.PodCIDRs) > 1 {
		return cluster.PodCIDR6Of(i)
	}
	return cluster.DefaultPodCIDR6
}

// pick returns the value for cluster k of a list given once for every
// cluster or once per cluster, or def when none is given.
func pick[T any](list []T, k int, def T) T {
	switch {
	case len(list) == 0:
		return def
	case len(list) == 1:
		return list[0]
	}
	return list[k]
}

func (o *Options) validate() error {
	if os.Geteuid() != 0 {
		return errors.New("the lab needs root: it creates network namespaces, cgroups and mounts")
	}
	if len(o.Names) == 0 {
		return errors.New("no cluster names given")
	}
	seen := map[string]bool{}
	for _, name := range o.Names {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return fmt.Errorf("cluster name %q: %s", name, strings.Join(errs, "; "))
		}
		if seen[name] {
			return fmt.Errorf("cluster name %q given twice", name)
		}
		seen[name] = true
	}
	if o.FirstIndex < 0 || o.FirstIndex+len(o.Names)-1 > maxIndex {
		return fmt.Errorf("cluster indices %d..%d: must lie in 1..%d", o.FirstIndex, o.FirstIndex+len(o.Names)-1, maxIndex)
	}
	if o.Nodes < 0 || o.Nodes > cluster.MaxNodes {
		return fmt.Errorf("--nodes %d: must lie in 1..%d", o.Nodes, cluster.MaxNodes)
	}
	if err := o.ProxyMode.CheckKernel(); err != nil {
		return fmt.Errorf("--kube-proxy-mode: %w", err)
	}
	if o.KubernetesMinor != "" && !kubernetesMinor.MatchString(o.KubernetesMinor) {
		return fmt.Errorf("--kubernetes-version %q: want a minor release such as 1.35", o.KubernetesMinor)
	}
	if o.NoNodePodCIDRs && cmp.Or(o.CNI, cluster.Bridge) != cluster.Bridge {
		return fmt.Errorf("--node-pod-cidrs=false: only with --cni %s: %s reads the Nodes' pod ranges", cluster.Bridge, o.CNI)
	}
	if len(o.IPFamilies) > 1 && len(o.IPFamilies) != len(o.Names) {
		return fmt.Errorf("--ip-family: %d families for %d clusters: give one for all or one per cluster", len(o.IPFamilies), len(o.Names))
	}
	for _, family := range o.IPFamilies {
		if _, err := cluster.ParseIPFamily(string(family)); err != nil {
			return fmt.Errorf("--ip-family: %w", err)
		}
		if family.HasIPv6() {
			// The lab runs flanneld with an IPv4 network only, and hands
			// out the IPv4 blocks alone when the Nodes have no ranges.
			if cmp.Or(o.CNI, cluster.Bridge) != cluster.Bridge {
				return fmt.Errorf("--ip-family %s: only with --cni %s: the lab's %s pod network is IPv4-only", family, cluster.Bridge, o.CNI)
			}
			if o.NoNodePodCIDRs {
				return fmt.Errorf("--ip-family %s: not with --node-pod-cidrs=false, which the lab simulates for IPv4 only", family)
			}
		}
		if family == cluster.IPv6 && o.LoadBalancer != NoLoadBalancer {
			return fmt.Errorf("--load-balancer %s: not with --ip-family %s: its pool is of the IPv4 node network", o.LoadBalancer, family)
		}
	}
	// A range given for all goes to the clusters of its family; ranges given
	// one per cluster need every cluster to be of their family, or one of
	// them would be dropped unseen.
	for _, r := range []struct {
		flag string
		list []netip.Prefix
		has  func(cluster.IPFamily) bool
		want string
	}{
		{"--pod-cidrs", o.PodCIDRs, cluster.IPFamily.HasIPv4, "IPv4 ranges (--pod-cidrs-v6 gives the IPv6 ones)"},
		{"--service-cidrs", o.ServiceCIDRs, cluster.IPFamily.HasIPv4, "IPv4 ranges"},
		{"--pod-cidrs-v6", o.PodCIDRs6, cluster.IPFamily.HasIPv6, fmt.Sprintf("IPv6 ranges (only %s and %s clusters do)", cluster.IPv6, cluster.DualStack)},
	} {
		switch {
		case len(r.list) > 0 && !o.anyFamily(r.has):
			return fmt.Errorf("%s: no cluster has %s", r.flag, r.want)
		case len(r.list) > 1 && !o.allFamilies(r.has):
			return fmt.Errorf("%s: one range per cluster, but not every cluster has %s", r.flag, r.want)
		}
	}
	for _, l := range []struct {
		flag string
		list []netip.Prefix
		v6   bool
	}{{"--pod-cidrs", o.PodCIDRs, false}, {"--service-cidrs", o.ServiceCIDRs, false}, {"--pod-cidrs-v6", o.PodCIDRs6, true}} {
		if len(l.list) > 1 && len(l.list) != len(o.Names) {
			return fmt.Errorf("%s: %d ranges for %d clusters: give one for all or one per cluster", l.flag, len(l.list), len(o.Names))
		}
		for _, p := range l.list {
			if l.v6 {
				// kube-controller-manager splits a range into at most 2^16
				// node ranges of /64, and every node needs one.
				if !p.Addr().Is6() || p.Addr().Is4In6() || p != p.Masked() || p.Bits() < 64-16 || p.Bits() > 64-4 {
					return fmt.Errorf("%s %s: must be an IPv6 network of /%d to /%d", l.flag, p, 64-16, 64-4)
				}
				for _, taken := range []string{cluster.NodeNetworks6, cluster.ServiceNetworks6} {
					if p.Overlaps(netip.MustParsePrefix(taken)) {
						return fmt.Errorf("%s %s: overlaps the lab's %s", l.flag, p, taken)
					}
				}
				continue
			}
			if !p.Addr().Is4() || p != p.Masked() || p.Bits() > 28 {
				return fmt.Errorf("%s %s: must be an IPv4 network of at most /28", l.flag, p)
			}
			if p.Overlaps(netip.MustParsePrefix(cluster.NodeNetwork)) {
				return fmt.Errorf("%s %s: overlaps the lab's node networks %s", l.flag, p, cluster.NodeNetwork)
			}
		}
	}
	if len(o.Installers) > 1 && len(o.Installers) != len(o.Names) {
		return fmt.Errorf("--install: %d installers for %d clusters: give one for all or one per cluster", len(o.Installers), len(o.Names))
	}
	for _, i := range o.Installers {
		if _, err := ParseInstaller(string(i)); err != nil {
			return fmt.Errorf("--install: %w", err)
		}
	}
	if o.LoadBalancer != NoLoadBalancer {
		if _, err := ParseLoadBalancer(string(o.LoadBalancer)); err != nil {
			return fmt.Errorf("--load-balancer: %w", err)
		}
	}
	for k := range o.Names {
		if !o.family(k).HasIPv4() {
			continue
		}
		pod, svc := pick(o.PodCIDRs, k, cluster.DefaultPodCIDR), pick(o.ServiceCIDRs, k, cluster.DefaultServiceCIDR)
		if pod.Overlaps(svc) {
			return fmt.Errorf("cluster %s: pod range %s overlaps service range %s", o.Names[k], pod, svc)
		}
	}
	if !filepath.IsAbs(o.Dir) {
		return fmt.Errorf("lab directory %q: must be absolute", o.Dir)
	}
	return nil
}

func (l *Lab) path(elem ...string) string {
	return filepath.Join(append([]string{l.Dir}, elem...)...)
}

func (l *Lab) namespaces() []string {
	var out []string
	for _, c := range l.Clusters {
		for _, n := range c.Nodes() {
			out = append(out, n.Namespace())
		}
	}
	return out
}

// runScript runs one of the repository's setup scripts, which are
// idempotent and print their own progress.
func runScript(ctx context.Context, out io.Writer, repo, script string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(repo, script), args...)
	cmd.Dir = repo
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", script, err)
	}
	return nil
}

// Down removes the lab in dir completely and checks that nothing is left.
func Down(dir string, out io.Writer) error {
	p := NewProgress(out)
	s, err := ReadState(dir)
	if err != nil && !isNotExist(err) {
		return err
	}
	var recorded []int
	for _, c := range s.Clusters {
		recorded = append(recorded, c.Index)
	}
	l := sweep.Find(dir, recorded)
	// The host lock is held from the removal to the check that nothing is
	// left: a lab coming up meanwhile takes the first free indices, these
	// once removed, and its namespaces would read as this lab's leftovers.
	unlock, err := lockHost()
	if err != nil {
		return err
	}
	defer unlock()
	if err := sweep.Remove(l, p.Logf); err != nil {
		return fmt.Errorf("lab in %s: %w", dir, err)
	}
	// Checked before releaseHost, which removes the lock's file when this
	// is the last lab: a lab starting after that locks a new file.
	left, err := l.Leftovers()
	if err != nil {
		return err
	}
	if err := releaseHost(); err != nil {
		return err
	}
	hostLeft, err := hostLeftovers()
	if err != nil {
		return err
	}
	left = append(left, hostLeft...)
	if len(left) > 0 {
		return fmt.Errorf("lab in %s: left behind:\n  %s", dir, strings.Join(left, "\n  "))
	}
	p.Logf("lab in %s removed: no process, mount, cgroup, namespace, interface or file of it is left", dir)
	return nil
}

// Open returns the lab running in dir, as recorded by Up.
func Open(dir string) (*Lab, error) {
	s, err := ReadState(dir)
	if err != nil {
		if isNotExist(err) {
			return nil, fmt.Errorf("no lab in %s: run lab up", dir)
		}
		return nil, err
	}
	// A lab records the release it runs; one made before it did runs the
	// default.
	binDir, err := filepath.EvalSymlinks(filepath.Join(s.Repo, "bin", "k8s", cmp.Or(s.Kubernetes, "current")))
	if err != nil {
		return nil, fmt.Errorf("kubernetes binaries: %w", err)
	}
	l := &Lab{Dir: dir, State: s, KubectlBin: filepath.Join(binDir, "kubectl"), progress: NewProgress(io.Discard)}
	for _, c := range s.Clusters {
		n := c.cluster()
		n.BinDir, n.Registry, n.Mirrored, n.Logf = binDir, s.Registry, images.Mirrored(), l.progress.Logf
		n.Dir = filepath.Join(dir, n.Namespace())
		l.Clusters = append(l.Clusters, n)
	}
	return l, nil
}

// Status prints the clusters of the lab in dir, their kubeconfigs and
// whether their nodes are Ready and their components running.
func Status(ctx context.Context, dir string, out io.Writer) error {
	l, err := Open(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "lab in %s, Kubernetes %s, registry %s (%s)\n", dir, cmp.Or(l.State.Kubernetes, "(default)"), l.State.Registry,
		running(filepath.Join(dir, "registry.pid")))
	for _, n := range l.Clusters {
		procs := "control plane running"
		if down := notRunning(cluster.ControlPlaneComponents(), n.PidFile); len(down) > 0 {
			procs = "control plane not running: " + strings.Join(down, ", ")
		}
		pods := cluster.Join(n.PodCIDRs())
		if n.NoNodePodCIDRs {
			pods += " (not on the Nodes)"
		}
		fmt.Fprintf(out, "%s  cluster ID %s  CNI %s  kube-proxy %s  IP family %s  pods %s  services %s  api %s\n    kubeconfig %s\n    %s\n",
			n.Name, cmp.Or(n.ClusterID, "(peerlink not installed)"), n.CNI, n.ProxyMode, cmp.Or(n.IPFamily, cluster.IPv4), pods,
			cluster.Join(n.ServiceCIDRs()), n.APIServerURL(), n.Kubeconfig(), procs)
		for _, node := range n.Nodes() {
			ready := "not Ready"
			if ok, why := node.Ready(ctx); ok {
				ready = "Ready"
			} else if why != "" {
				ready += " (" + why + ")"
			}
			procs := ""
			if down := notRunning(cluster.NodeComponents(), node.PidFile); len(down) > 0 {
				procs = ", not running: " + strings.Join(down, ", ")
			}
			fmt.Fprintf(out, "    node %s  %s  namespace %s  %s%s\n", node.Name(), cluster.Join(node.IPs()), node.Namespace(), ready, procs)
		}
		for _, peer := range l.Clusters {
			if peer == n {
				continue
			}
			// Errors here only mean the API server is not answering,
			// which the node readiness above already says.
			if state, err := l.ConnectionState(ctx, n, peer); err == nil && state != "" {
				fmt.Fprintf(out, "    peered with %s: %s\n", peer.Name, state)
			}
		}
	}
	return nil
}

// notRunning are the components whose pid file names no running process.
func notRunning(components []string, pidFile func(string) string) []string {
	var down []string
	for _, c := range components {
		if running(pidFile(c)) != "running" {
			down = append(down, c)
		}
	}
	return down
}

func running(pidFile string) string {
	pid, err := proc.ReadPidFile(pidFile)
	if err != nil || !proc.Running(pid) {
		return "not running"
	}
	return "running"
}
