// Command lab runs real Kubernetes clusters on this machine for peerlink's
// demo, end-to-end tests and benchmarks. Each cluster is a single node in its
// own network namespace, with pod CIDR 10.244.0.0/24 in every cluster.
//
//	go run ./lab up [--clusters=2] [--cluster-names=cluster-1,cluster-2] [--dir=/var/lib/peerlink-lab]
//	go run ./lab demo [--dir=...]
//	go run ./lab bench [--json] [--only=connect,dataplane,services,failover | --mesh] [--kube-proxy-mode=nftables] [--bench-dir=/var/lib/peerlink-lab-bench]
//	go run ./lab status [--dir=...]
//	go run ./lab down [--dir=...]
//
// It needs root. up installs what it needs itself (hack/install-deps.sh,
// hack/testbin.sh) and replaces a lab already in the directory; down removes
// every trace of it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/peerlink/peerlink/internal/choice"
	"github.com/peerlink/peerlink/lab/figures"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/labctl"
	"github.com/peerlink/peerlink/testkit/testenv"
)

func main() {
	// controller-runtime from v0.25 logs through its root logger whenever
	// a client is made, and prints a stack trace to stderr when that
	// logger was never set 30 s into the process: this command reports
	// through its own output and returned errors.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "lab",
		Short:         "Real Kubernetes clusters on this machine, for peerlink's demo and tests",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var dir, benchDir string
	root.PersistentFlags().StringVar(&dir, "dir", labctl.DefaultDir, "directory of the lab's state")
	// The lab records and compares absolute paths.
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		for _, d := range []*string{&dir, &benchDir} {
			abs, err := filepath.Abs(*d)
			if err != nil {
				return err
			}
			*d = abs
		}
		return nil
	}

	var clusters, nodes, firstIndex int
	var names []string
	var cni, proxyMode, kubeMinor string
	var nodePodCIDRs bool
	var podCIDRs, podCIDRs6, serviceCIDRs, routedPeer []net.IPNet
	var flux, importAll bool
	var installs, ipFamilies []string
	var loadBalancer string
	up := &cobra.Command{
		Use:   "up",
		Short: "Bring up the clusters (replacing a lab already in --dir) with the echo server and peerlink installed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("cluster-names") && cmd.Flags().Changed("clusters") && len(names) != clusters {
				return fmt.Errorf("--clusters=%d but --cluster-names names %d clusters", clusters, len(names))
			}
			if !cmd.Flags().Changed("cluster-names") {
				names = nil
				for i := 1; i <= clusters; i++ {
					names = append(names, fmt.Sprintf("cluster-%d", i))
				}
			}
			c, err := cluster.ParseCNI(cni)
			if err != nil {
				return fmt.Errorf("--cni: %w", err)
			}
			mode, err := cluster.ParseProxyMode(proxyMode)
			if err != nil {
				return fmt.Errorf("--kube-proxy-mode: %w", err)
			}
			families, err := choice.Each(ipFamilies, cluster.ParseIPFamily)
			if err != nil {
				return fmt.Errorf("--ip-family: %w", err)
			}
			installers, err := choice.Each(installs, labctl.ParseInstaller)
			if err != nil {
				return fmt.Errorf("--install: %w", err)
			}
			lb, err := labctl.ParseLoadBalancer(loadBalancer)
			if err != nil {
				return fmt.Errorf("--load-balancer: %w", err)
			}
			repo, err := testenv.RepoRoot()
			if err != nil {
				return err
			}
			l, err := labctl.Up(cmd.Context(), labctl.Options{
				Dir: dir, Names: names, FirstIndex: firstIndex, Repo: repo, Out: cmd.OutOrStdout(),
				Nodes: nodes, CNI: c, ProxyMode: mode, KubernetesMinor: strings.TrimPrefix(kubeMinor, "v"), NoNodePodCIDRs: !nodePodCIDRs, PodCIDRs: prefixes(podCIDRs), ServiceCIDRs: prefixes(serviceCIDRs), Flux: flux,
				IPFamilies: families, PodCIDRs6: prefixes(podCIDRs6),
				ImportAllNamespaces: importAll,
				RoutedPeerCIDRs:     prefixes(routedPeer),
				Installers:          installers,
				LoadBalancer:        lb,
			})
			if err != nil {
				return err
			}
			printClusters(cmd.OutOrStdout(), l)
			return nil
		},
	}
	up.Flags().IntVar(&clusters, "clusters", 2, "number of clusters")
	up.Flags().StringSliceVar(&names, "cluster-names", []string{"cluster-1", "cluster-2"}, "cluster names, one per cluster, which name the nodes and kubeconfig contexts (peerlink detects its own cluster IDs)")
	up.Flags().IntVar(&firstIndex, "first-index", 1, "index of the first cluster (network namespace cN, node network 172.30.N.0/24; the others follow); 0 takes the first free indices from 11 on, beside another lab of the machine")
	up.Flags().IntVar(&nodes, "nodes", 2, fmt.Sprintf("nodes per cluster (1 to %d); the first runs the control plane", cluster.MaxNodes))
	up.Flags().StringVar(&cni, "cni", string(cluster.Bridge), "pod network of every cluster: bridge or flannel")
	up.Flags().StringVar(&kubeMinor, "kubernetes-version", "", "minor release of Kubernetes every cluster runs, such as 1.35: the default's (hack/kube) or one pinned in hack/kube-1.N (default: hack/kube's)")
	up.Flags().BoolVar(&nodePodCIDRs, "node-pod-cidrs", true, "give the Nodes their pod ranges (spec.podCIDRs); false simulates a CNI with its own IPAM: the lab hands each node's bridge its range, and the Nodes have none (bridge CNI only)")
	up.Flags().StringVar(&proxyMode, "kube-proxy-mode", string(cluster.IPTables), "kube-proxy's mode on every node: iptables, nftables or ipvs (ipvs needs a kernel with IPVS)")
	up.Flags().StringSliceVar(&ipFamilies, "ip-family", nil, fmt.Sprintf("family of every cluster's Nodes, pods and Services, or of each (dual,ipv4): %s (the default), %s (IPv6-only; the node network keeps IPv4 for the lab's registry) or %s (dual-stack, IPv4 first)",
		cluster.IPv4, cluster.IPv6, cluster.DualStack))
	up.Flags().IPNetSliceVar(&podCIDRs6, "pod-cidrs-v6", nil, fmt.Sprintf("IPv6 pod range of every cluster, or one per cluster, with --ip-family %s or %s (default: %s for all when the clusters share an IPv4 pod range, fd44:<index>::/48 when each has its own)",
		cluster.IPv6, cluster.DualStack, cluster.DefaultPodCIDR6))
	up.Flags().IPNetSliceVar(&podCIDRs, "pod-cidrs", nil, fmt.Sprintf("pod range of every cluster, or one per cluster (default %s for all)", cluster.DefaultPodCIDR))
	up.Flags().BoolVar(&flux, "flux", false, "install Flux's source-controller and kustomize-controller (built from source) in every cluster")
	up.Flags().BoolVar(&importAll, "import-all-namespaces", false, "let every namespace take the services peers export (IMPORT_NAMESPACES=*), as a Multi-Cluster Services conformance run needs")
	up.Flags().StringSliceVar(&installs, "install", nil, fmt.Sprintf("how peerlink is installed in every cluster, or in each: %s (kubectl apply -k bundles/install) or %s (helm install of the chart) (default %s for all)",
		labctl.Kustomize, labctl.Helm, labctl.Kustomize))
	up.Flags().StringVar(&loadBalancer, "load-balancer", "", fmt.Sprintf("load balancer of every cluster: %s (MetalLB in L2 mode, built from source, announcing 172.30.N.240-254 on the node network of cluster N); the lab then peers through LoadBalancer gateway Services (default none: NodePorts)",
		labctl.MetalLB))
	up.Flags().IPNetSliceVar(&routedPeer, "routed-peer-cidrs", nil, "address plan for peers of every cluster's controller (ROUTED_PEER_CIDRS): a peer's pod range inside it is routed as it is (default none: every peer range is remapped)")
	up.Flags().IPNetSliceVar(&serviceCIDRs, "service-cidrs", nil, fmt.Sprintf("service range of every cluster, or one per cluster (default %s for all)", cluster.DefaultServiceCIDR))

	down := &cobra.Command{
		Use:   "down",
		Short: "Remove every process, mount, cgroup, namespace, interface and file of the lab",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return labctl.Down(dir, cmd.OutOrStdout())
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Print the clusters, their kubeconfigs and node readiness",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return labctl.Status(cmd.Context(), dir, cmd.OutOrStdout())
		},
	}
	demo := &cobra.Command{
		Use:   "demo",
		Short: "Peer the first two clusters with peerlink network connect and show traffic between their pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := labctl.Open(dir)
			if err != nil {
				return err
			}
			if err := l.Demo(cmd.Context(), cmd.OutOrStdout()); err != nil {
				return err
			}
			printClusters(cmd.OutOrStdout(), l)
			return nil
		},
	}
	var asJSON bool
	var only []string
	var benchProxyMode string
	var mesh bool
	bench := &cobra.Command{
		Use:   "bench",
		Short: "Bring up a fresh pair of clusters, peer them, print whole-system figures, and remove them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			repo, err := testenv.RepoRoot()
			if err != nil {
				return err
			}
			// Progress goes to stderr: stdout carries the figures.
			progress := cmd.ErrOrStderr()
			defer func() {
				if derr := labctl.Down(benchDir, progress); derr != nil && err == nil {
					err = derr
				}
			}()
			mode, err := cluster.ParseProxyMode(benchProxyMode)
			if err != nil {
				return fmt.Errorf("--kube-proxy-mode: %w", err)
			}
			names := []string{"bench-a", "bench-b"}
			if mesh {
				names = nil
				for i := 1; i <= labctl.MeshClusters; i++ {
					names = append(names, fmt.Sprintf("mesh-%d", i))
				}
			}
			l, err := labctl.Up(cmd.Context(), labctl.Options{
				Dir: benchDir, Names: names, Repo: repo, Out: progress, ProxyMode: mode,
			})
			if err != nil {
				return err
			}
			if mesh {
				m, err := l.BenchMesh(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(m)
				}
				printMesh(cmd.OutOrStdout(), m)
				return nil
			}
			f, err := l.Bench(cmd.Context(), only...)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(f)
			}
			printFigures(cmd.OutOrStdout(), f)
			return nil
		},
	}
	bench.Flags().StringVar(&benchDir, "bench-dir", labctl.DefaultDir+"-bench", "directory of the benchmark's own lab")
	bench.Flags().BoolVar(&asJSON, "json", false, "print the figures as JSON")
	bench.Flags().StringSliceVar(&only, "only", nil, "measure only these parts ("+strings.Join(labctl.BenchParts, ", ")+"); empty: all")
	bench.Flags().BoolVar(&mesh, "mesh", false, fmt.Sprintf("measure a full mesh of %d clusters instead of one peering (--only does not apply)", labctl.MeshClusters))
	// At the services part's 100,000 endpoints, one sync of kube-proxy's
	// iptables mode (through iptables-nft) took minutes on a machine of
	// two cores, which held every Service change behind it, a gateway's
	// own included; the nftables mode writes only what changed.
	bench.Flags().StringVar(&benchProxyMode, "kube-proxy-mode", string(cluster.NFTables), "kube-proxy's mode on every node of the benchmark's clusters: iptables, nftables or ipvs")
	var suite, confDir string
	var keep bool
	conformance := &cobra.Command{
		Use:   "conformance --suite DIR [-- SUITE FLAGS]",
		Short: "Run the Multi-Cluster Services conformance suite (a checkout's conformance/ directory) against two fresh peered clusters, and remove them",
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, err := testenv.RepoRoot()
			if err != nil {
				return err
			}
			abs, err := filepath.Abs(confDir)
			if err != nil {
				return err
			}
			return labctl.Conformance(cmd.Context(), labctl.ConformanceOptions{
				Suite: suite, Dir: abs, Repo: repo, Out: cmd.OutOrStdout(), Args: args, Keep: keep,
			})
		},
	}
	conformance.Flags().StringVar(&suite, "suite", "", "the conformance/ directory of a checkout of the mcs-api repository (kubernetes-sigs/mcs-api)")
	conformance.Flags().StringVar(&confDir, "conformance-dir", labctl.DefaultConformanceDir, "directory of the run's own lab and of the suite's reports (conformance/)")
	conformance.Flags().BoolVar(&keep, "keep", false, "leave the clusters running after the run (lab down --dir takes them down)")
	root.AddCommand(up, demo, bench, down, status, conformance)
	return root
}

// printClusters tells how to reach the clusters, which keep running.
func printClusters(out io.Writer, l *labctl.Lab) {
	fmt.Fprintln(out, "\nThe clusters keep running (go run ./lab down removes them):")
	for _, c := range l.State.Clusters {
		fmt.Fprintf(out, "  %s (cluster ID %s)  %s --kubeconfig %s get pods -A\n", c.Name, c.ID, l.KubectlBin, c.Kubeconfig)
	}
	fmt.Fprintf(out, "One kubeconfig with a context per cluster: %s\n", l.Kubeconfig())
}

func printFigures(out io.Writer, f figures.Figures) {
	fmt.Fprintf(out, "last manifest applied -> Connected on both sides: %.2fs\n", f.ConnectSeconds)
	for _, id := range slices.Sorted(maps.Keys(f.RecoverySeconds)) {
		fmt.Fprintf(out, "gateway pod of %s deleted -> longest time without traffic: %.2fs\n", id, f.RecoverySeconds[id])
	}
	for _, id := range slices.Sorted(maps.Keys(f.FailoverSeconds)) {
		fmt.Fprintf(out, "2 gateway replicas, active pod of %s deleted -> longest time without traffic: %.2fs\n", id, f.FailoverSeconds[id])
	}
	for _, p := range []struct {
		name string
		p    figures.Path
	}{{"through the peering", f.Tunnel}, {"over the node network", f.Bare}} {
		if p.p == (figures.Path{}) {
			continue // not measured (--only)
		}
		fmt.Fprintf(out, "pod to pod %s: %.0f Mbit/s, %.0f request/response per second\n",
			p.name, p.p.BitsPerSecond/1e6, p.p.ExchangesPerSecond)
	}
	s := f.Services
	if len(s.ExportToAnswerSeconds) == 0 {
		return // not measured (--only)
	}
	fmt.Fprintf(out, "ServiceExport -> answer by clusterset name in the peer: median %.2fs of %d trials (goal <= 1 s)\n",
		s.MedianExportToAnswer, len(s.ExportToAnswerSeconds))
	fmt.Fprintf(out, "%d exported services of %d endpoints -> all imported: %.1fs (goal <= 30 s), every endpoint ready: %.1fs\n", s.Services, s.Endpoints, s.ImportSeconds, s.ReadySeconds)
	fmt.Fprintf(out, "  the same Services and EndpointSlices written directly, %d at once: %.1fs; with a ServiceImport and its status each: %.1fs\n",
		s.DirectWorkers, s.DirectSeconds, s.DirectImportsSeconds)
	fmt.Fprintf(out, "  one endpoint's readiness changed -> the peer's EndpointSlice: %.2fs (median of 5, goal <= 1 s); %.1f MiB through the tunnel\n",
		s.EndpointChangeSeconds, s.TunnelBytes/(1<<20))
	for _, k := range slices.Sorted(maps.Keys(s.Memory)) {
		fmt.Fprintf(out, "  peak resident memory, %s: %.0f MiB\n", k, s.Memory[k]/(1<<20))
	}
}

// printMesh writes the mesh's figures as lines a person reads.
func printMesh(out io.Writer, m figures.Mesh) {
	fmt.Fprintf(out, "%d peerings of %d clusters: first connect -> all Connected: %.1fs\n", m.Peerings, m.Clusters, m.ConnectedSeconds)
	fmt.Fprintf(out, "first connect -> every cluster answered by every other's Service, by name: %.1fs\n", m.ServicesSeconds)
	for _, g := range []struct {
		what  string
		vs    []float64
		scale float64
		unit  string
	}{
		{"resident memory of each active gateway pod", m.GatewayMemory, 1.0 / (1 << 20), "MiB"},
		{"resident memory of each controller", m.ControllerMemory, 1.0 / (1 << 20), "MiB"},
		{"idle CPU of each active gateway pod", m.GatewayIdleCPU, 1000, "millicores"},
		{"idle CPU of each controller", m.ControllerIdleCPU, 1000, "millicores"},
	} {
		var vs []string
		for _, v := range g.vs {
			vs = append(vs, fmt.Sprintf("%.1f", v*g.scale))
		}
		fmt.Fprintf(out, "%s: %s %s\n", g.what, strings.Join(vs, ", "), g.unit)
	}
}

// prefixes turns parsed flag values into prefixes; the flag parser has
// already refused what is not a network.
func prefixes(nets []net.IPNet) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(nets))
	for _, n := range nets {
		addr, _ := netip.AddrFromSlice(n.IP)
		ones, _ := n.Mask.Size()
		out = append(out, netip.PrefixFrom(addr.Unmap(), ones))
	}
	return out
}
