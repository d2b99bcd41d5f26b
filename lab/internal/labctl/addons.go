package labctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/peerlink/peerlink/lab/internal/addons"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/images"
)

// Programs the lab takes from the components hack/components.sh builds.
const (
	coreDNSProgram = "coredns"
	flannelProgram = "flanneld"
)

// fluxControllers are the Flux controllers the lab runs, as they are named
// by hack/components.sh, their images and their Deployments.
var fluxControllers = []string{"source-controller", "kustomize-controller"}

// fluxUser runs the Flux controllers, whose Deployments demand a user other
// than root: nobody, as distroless images have it.
const fluxUser = "65534:65534"

// LoadBalancer is the load balancer the lab installs in its clusters.
type LoadBalancer string

const (
	// NoLoadBalancer leaves Services of type LoadBalancer pending.
	NoLoadBalancer LoadBalancer = ""
	// MetalLB is MetalLB in L2 mode, as bare-metal clusters run it: its
	// speakers answer ARP on the node network for the addresses of a pool
	// the lab sets aside there (cluster.LoadBalancerRange).
	MetalLB LoadBalancer = "metallb"
)

// ParseLoadBalancer accepts the names of the load balancers.
func ParseLoadBalancer(s string) (LoadBalancer, error) {
	switch lb := LoadBalancer(s); lb {
	case NoLoadBalancer, MetalLB:
		return lb, nil
	}
	return "", fmt.Errorf("unknown load balancer %q: the lab knows %s (empty for none)", s, MetalLB)
}

// publishComponents builds the components the clusters run (CoreDNS
// always, flanneld when a cluster uses Flannel) from their upstream sources,
// unless bin/ has them, and publishes their images in the lab registry,
// with the tool images made of Debian packages.
func (l *Lab) publishComponents(ctx context.Context, out io.Writer) error {
	wanted := []images.Component{{
		File:  filepath.Join(l.State.Repo, "bin", "coredns", "current", coreDNSProgram),
		Image: addons.Image(l.State.Registry, coreDNSProgram),
	}}
	if slices.ContainsFunc(l.Clusters, func(c *cluster.Cluster) bool { return c.CNI == cluster.Flannel }) {
		// flanneld programs the masquerade and forward rules with the
		// iptables command, as the image users run ships it.
		wanted = append(wanted, images.Component{
			File:         filepath.Join(l.State.Repo, "bin", "flannel", "current", flannelProgram),
			Image:        addons.Image(l.State.Registry, flannelProgram),
			HostPrograms: []string{"/usr/sbin/iptables", "/usr/sbin/iptables-save", "/usr/sbin/iptables-restore"},
			PluginDirs:   xtablesDirs(),
		})
	}
	if l.flux {
		for _, name := range fluxControllers {
			wanted = append(wanted, images.Component{
				File:  filepath.Join(l.State.Repo, "bin", "flux", "current", name),
				Image: addons.Image(l.State.Registry, name),
				User:  fluxUser,
			})
		}
	}
	if l.State.LoadBalancer == MetalLB {
		// The controller's Deployment names its user (nobody) itself.
		wanted = append(wanted, images.Component{
			File:  filepath.Join(l.State.Repo, "bin", "metallb", "current", addons.MetalLBController),
			Image: addons.Image(l.State.Registry, addons.MetalLBController),
		}, images.Component{
			File:  filepath.Join(l.State.Repo, "bin", "metallb", "current", addons.MetalLBSpeaker),
			Image: addons.Image(l.State.Registry, addons.MetalLBSpeaker),
		})
	}
	var names []string
	for _, c := range wanted {
		names = append(names, filepath.Base(c.File))
	}
	if err := runScript(ctx, out, l.State.Repo, "hack/components.sh", names...); err != nil {
		return err
	}
	if err := images.PublishComponents(ctx, wanted); err != nil {
		return err
	}
	l.progress.Logf("registry serves %s, built from upstream sources", strings.Join(names, " and "))
	if err := images.PublishComponents(ctx, images.Tools(l.State.Registry)); err != nil {
		return err
	}
	l.progress.Logf("registry serves %s and %s, made of this machine's Debian packages", images.SocatImage, images.NetshootImage)
	return nil
}

// xtablesDirs are the directories of iptables' extensions on this machine.
func xtablesDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/*/xtables")
	return dirs
}

// printTopology says what the lab is about to bring up.
func (l *Lab) printTopology(p *Progress) {
	for _, c := range l.Clusters {
		var nodes []string
		for _, n := range c.Nodes() {
			nodes = append(nodes, fmt.Sprintf("%s %s", n.Name(), cluster.Join(n.IPs())))
		}
		network := c.NodeNetwork().String()
		if c.IPFamily.HasIPv6() {
			network += "," + c.NodeNetwork6().String()
		}
		p.Logf("%s: CNI %s, kube-proxy in %s mode, IP family %s, pods %s, services %s, node network %s; nodes %s",
			c.Name, c.CNI, c.ProxyMode, c.IPFamily, cluster.Join(c.PodCIDRs()), cluster.Join(c.ServiceCIDRs()), network, strings.Join(nodes, ", "))
	}
}

// bringUp starts a cluster's control plane and nodes, its pod network and
// its DNS, and waits until pods can run and resolve Service names.
func (l *Lab) bringUp(ctx context.Context, c *cluster.Cluster) error {
	if err := c.Up(ctx); err != nil {
		return err
	}
	params := addons.Params{
		Registry:         l.State.Registry,
		PodCIDR:          c.PodCIDR,
		DNSIP:            c.DNSIP(),
		DNSIPs:           c.DNSIPs(),
		ClusterDomain:    cluster.ClusterDomain,
		ClustersetDomain: cluster.ClustersetDomain,
		FlannelRunDir:    c.FlannelRunDir(),
	}
	if c.CNI == cluster.Flannel {
		if err := l.applyAddon(ctx, c, addons.Flannel, params); err != nil {
			return err
		}
		if err := c.Network(ctx); err != nil {
			return err
		}
		l.progress.Logf("%s: Flannel (VXLAN) leased every node its pod range", c.Name)
	}
	if err := c.WaitReady(ctx); err != nil {
		return err
	}
	// CoreDNS serves the clusterset zone from ServiceImports: their CRDs,
	// those of the install bundle, come first.
	mcsCRDs, err := filepath.Glob(filepath.Join(l.InstallBundle(), "crds", "multicluster.x-k8s.io_*.yaml"))
	if err != nil || len(mcsCRDs) == 0 {
		return fmt.Errorf("cluster %s: the Multi-Cluster Services CRDs of %s: %v", c.Name, l.InstallBundle(), err)
	}
	args := []string{"apply", "--server-side"}
	for _, f := range mcsCRDs {
		args = append(args, "-f", f)
	}
	if _, err := l.Kubectl(ctx, c, args...); err != nil {
		return err
	}
	if err := l.applyAddon(ctx, c, addons.CoreDNS, params); err != nil {
		return err
	}
	if err := l.waitRollout(ctx, c, "kube-system", "deployment/coredns"); err != nil {
		return err
	}
	l.progress.Logf("%s: CoreDNS serves %s and %s at %s", c.Name, cluster.ClusterDomain, cluster.ClustersetDomain, cluster.Join(c.DNSIPs()))
	if l.flux {
		if err := l.installFlux(ctx, c); err != nil {
			return err
		}
	}
	if l.State.LoadBalancer == MetalLB {
		return l.installMetalLB(ctx, c)
	}
	return nil
}

// installFlux applies the Flux controllers' own install configuration,
// from the modules hack/flux pins, and waits until they run.
func (l *Lab) installFlux(ctx context.Context, c *cluster.Cluster) error {
	deployments := make([]string, len(fluxControllers))
	for i, name := range fluxControllers {
		deployments[i] = "deployment/" + name
	}
	if err := applyPinned(ctx, l, c, "flux", addons.FindFluxControllers, addons.Flux, addons.FluxNamespace, deployments...); err != nil {
		return err
	}
	l.progress.Logf("%s: Flux %s running in %s", c.Name, strings.Join(fluxControllers, " and "), addons.FluxNamespace)
	return nil
}

// installMetalLB applies MetalLB's own install configuration, from the
// module hack/metallb pins, waits until its controller and speakers run,
// and gives it the cluster's pool of addresses to announce in L2 mode.
func (l *Lab) installMetalLB(ctx context.Context, c *cluster.Cluster) error {
	start := time.Now()
	if err := applyPinned(ctx, l, c, "metallb", addons.FindMetalLB, addons.MetalLB, addons.MetalLBNamespace, "deployment/controller", "daemonset/speaker"); err != nil {
		return err
	}
	first, last := c.LoadBalancerRange()
	pool, err := addons.MetalLBPool(first, last)
	if err != nil {
		return err
	}
	// The pool goes through the controller's validating webhook, whose
	// certificate the controller makes and installs once it runs: until
	// the API server trusts it, the apply fails.
	for {
		err := l.applyManifest(ctx, c, "metallb-pool", pool)
		if err == nil {
			break
		}
		if time.Since(start) > 3*time.Minute {
			return fmt.Errorf("cluster %s: metallb pool: %w", c.Name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s: metallb pool: %w (last error: %v)", c.Name, ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
	l.progress.Logf("%s: MetalLB (L2) announces %s-%s on %s, installed in %.1fs",
		c.Name, first, last, c.NodeNetwork(), time.Since(start).Seconds())
	return nil
}

// applyPinned applies the add-on name from its own install configuration:
// find reads the modules the repository pins for it, build makes the
// manifests of them for the lab's registry. It then waits until each of
// workloads (kind/name) in namespace ns has rolled out.
func applyPinned[T any](ctx context.Context, l *Lab, c *cluster.Cluster, name string,
	find func(ctx context.Context, repo string) (T, error), build func(found T, registry string) ([]byte, error),
	ns string, workloads ...string) error {
	found, err := find(ctx, l.State.Repo)
	if err != nil {
		return err
	}
	data, err := build(found, l.State.Registry)
	if err != nil {
		return err
	}
	if err := l.applyManifest(ctx, c, name, data); err != nil {
		return err
	}
	return l.waitRollout(ctx, c, ns, workloads...)
}

// applyAddon renders an add-on for the cluster, keeps the manifest in the
// cluster's directory and applies it.
func (l *Lab) applyAddon(ctx context.Context, c *cluster.Cluster, name string, p addons.Params) error {
	data, err := addons.Render(name, p)
	if err != nil {
		return err
	}
	return l.applyManifest(ctx, c, name, data)
}

// applyManifest keeps the manifest of an add-on in the cluster's directory,
// as <name>.yaml, and applies it.
func (l *Lab) applyManifest(ctx context.Context, c *cluster.Cluster, name string, data []byte) error {
	file := filepath.Join(c.Dir, "addons", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	_, err := l.Kubectl(ctx, c, "apply", "--server-side", "-f", file)
	return err
}
