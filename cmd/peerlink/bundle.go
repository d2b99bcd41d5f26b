package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/generators"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/peering"
)

func newBundleCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Manage the GitOps peer bundle of one peering",
		Long: `A peer bundle is a kustomize directory holding the objects of one peering on
this cluster: this side's gateway, and what the peer sent (its Configuration,
its PublicKey and, for a client, the GatewayClient pointing at the server).
Two files travel between the admins, one each way; no private key does.

  client admin: bundle init --role client, apply, bundle export  -> file 1
  server admin: bundle init --role server, bundle add file 1, apply,
                bundle export                                    -> file 2
  client admin: bundle add file 2, apply                         -> Connected`,
		Example: `  peerlink bundle init peers/cluster-b --peer cluster-b --role client
  peerlink bundle export --peer cluster-b -o to-cluster-b.yaml
  peerlink bundle add peers/cluster-b from-cluster-b.yaml`,
	}
	cmd.AddCommand(newBundleInitCmd(g), newBundleExportCmd(g), newBundleAddCmd())
	return cmd
}

func newBundleInitCmd(g *globalOptions) *cobra.Command {
	var peer, role, serviceType, lbIP, tmplName, tmplNS string
	var addresses []string
	var port, nodePort int32
	var mtu int
	var force bool
	cmd := &cobra.Command{
		Use:   "init DIR --peer ID --role server|client",
		Short: "Start the bundle of a peering with this side's gateway",
		Long: `Write DIR/kustomization.yaml, the tenant namespace and this side's gateway.

A client usually does not know the server's endpoint yet: its GatewayClient
gets an empty endpoint, which is valid; the controller still creates its keys
and reports WaitingForEndpoint until bundle add fills the endpoint in.

Running init again with the same flags changes nothing; with other flags it
refuses to overwrite the gateway unless --force (which also empties an
endpoint bundle add filled in). An existing kustomization.yaml is kept, with
the files of init added to its resources when missing.`,
		Example: `  # Client side, on cluster A, peering with cluster-b
  peerlink bundle init peers/cluster-b --peer cluster-b --role client

  # Server side, on cluster B, exposed on a fixed node port
  peerlink bundle init peers/cluster-a --peer cluster-a --role server \
    --service-type NodePort --node-port 30851`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := generators.ParseRole(role)
			if err != nil {
				return fmt.Errorf("--role: %w", err)
			}
			if err := clusterinfo.ValidateClusterID(peer); err != nil {
				return fmt.Errorf("--peer: %w", err)
			}
			if g.Namespace != "" {
				if err := generators.ValidateNamespace(g.Namespace); err != nil {
					return fmt.Errorf("--namespace: %w", err)
				}
			}
			if err := generators.ValidateMTU(mtu); err != nil {
				return fmt.Errorf("--mtu: %w", err)
			}
			p := generators.Peer{RemoteClusterID: peer, Namespace: g.Namespace}
			flags := cmd.Flags()
			var gateway runtime.Object
			if r == generators.RoleServer {
				for _, f := range []string{"addresses"} {
					if flags.Changed(f) {
						return fmt.Errorf("--%s: only for --role client", f)
					}
				}
				typ, err := generators.ParseServiceType(serviceType)
				if err != nil {
					return fmt.Errorf("--service-type: %w", err)
				}
				if port == 0 {
					port = netv1beta1.DefaultGatewayPort
				}
				if err := generators.ValidatePort(port); err != nil {
					return fmt.Errorf("--port: %w", err)
				}
				if flags.Changed("node-port") {
					if err := generators.ValidatePort(nodePort); err != nil {
						return fmt.Errorf("--node-port: %w", err)
					}
				}
				o := generators.GatewayServerOptions{Peer: p, ServiceType: typ, Port: port, NodePort: nodePort, MTU: mtu,
					TemplateName: tmplName, TemplateNamespace: tmplNS}
				if lbIP != "" {
					addr, err := netip.ParseAddr(lbIP)
					if err != nil || !addr.Is4() {
						return fmt.Errorf("--load-balancer-ip: %q is not an IPv4 address", lbIP)
					}
					o.LoadBalancerIP = addr
				}
				gw, err := generators.GatewayServer(o)
				if err != nil {
					return flagErrors(err, map[string]string{
						"spec.endpoint.nodePort":       "--node-port",
						"spec.endpoint.loadBalancerIP": "--load-balancer-ip",
					})
				}
				gateway = gw
			} else {
				for _, f := range []string{"service-type", "node-port", "load-balancer-ip"} {
					if flags.Changed(f) {
						return fmt.Errorf("--%s: only for --role server", f)
					}
				}
				addrs := splitList(addresses)
				for _, a := range addrs {
					if err := generators.ValidateAddress(a); err != nil {
						return fmt.Errorf("--addresses: %w", err)
					}
				}
				if flags.Changed("port") {
					if err := generators.ValidatePort(port); err != nil {
						return fmt.Errorf("--port: %w", err)
					}
				}
				if len(addrs) > 0 && port == 0 {
					return errors.New("--port: the server's port is needed with --addresses")
				}
				gw, err := generators.GatewayClient(generators.GatewayClientOptions{Peer: p, Addresses: addrs, Port: port, MTU: mtu,
					TemplateName: tmplName, TemplateNamespace: tmplNS})
				if err != nil {
					return flagErrors(err, nil)
				}
				gateway = gw
			}
			files, err := generators.InitBundle(gateway)
			if err != nil {
				return err
			}
			if files, err = keepKustomization(args[0], files); err != nil {
				return err
			}
			return writeBundleFiles(cmd.OutOrStdout(), args[0], files, force)
		},
	}
	f := cmd.Flags()
	f.StringVar(&peer, "peer", "", "ID of the peer cluster (required)")
	f.StringVar(&role, "role", "", "this side's role: server or client (required)")
	_ = cmd.MarkFlagRequired("peer")
	_ = cmd.MarkFlagRequired("role")
	f.StringVar(&serviceType, "service-type", string(corev1.ServiceTypeLoadBalancer), "server: type of the gateway Service: LoadBalancer, NodePort or ClusterIP")
	f.Int32Var(&port, "port", 0, "server: WireGuard port of the Service (default 51840); client: the server's port, when known")
	f.Int32Var(&nodePort, "node-port", 0, "server: pin the node port")
	f.StringVar(&lbIP, "load-balancer-ip", "", "server: address to request from the load balancer")
	f.StringArrayVar(&addresses, "addresses", nil, "client: the server's addresses, when known")
	f.IntVar(&mtu, "mtu", netv1beta1.DefaultMTU, "MTU of the tunnel; both sides must agree")
	f.StringVar(&tmplName, "template-name", "", "gateway template name (default: wireguard-server or wireguard-client)")
	f.StringVar(&tmplNS, "template-namespace", "", "gateway template namespace (default: the controller's namespace)")
	f.BoolVar(&force, "force", false, "overwrite files of an existing bundle")
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions([]string{"server", "client"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// keepKustomization replaces the new kustomization.yaml among files by the
// one dir already has, with the missing files added to its resources: what
// bundle add listed there, and the user's own changes, stay.
func keepKustomization(dir string, files []generators.File) ([]generators.File, error) {
	path := filepath.Join(dir, generators.KustomizationFile)
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return files, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var names []string
	for _, f := range files {
		if f.Name != generators.KustomizationFile {
			names = append(names, f.Name)
		}
	}
	merged, err := generators.AddResources(old, names...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	out := make([]generators.File, 0, len(files))
	for _, f := range files {
		if f.Name == generators.KustomizationFile {
			f.Data = merged
		}
		out = append(out, f)
	}
	return out, nil
}

// writeBundleFiles writes files into dir. A file already there with the
// same content is left alone; with other content it is only replaced with
// force, and otherwise nothing at all is written.
func writeBundleFiles(out io.Writer, dir string, files []generators.File, force bool) error {
	var conflicts []string
	for _, f := range files {
		old, err := os.ReadFile(filepath.Join(dir, f.Name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("read %s: %w", filepath.Join(dir, f.Name), err)
		case !bytes.Equal(old, f.Data):
			conflicts = append(conflicts, f.Name)
		}
	}
	if len(conflicts) > 0 && !force {
		return fmt.Errorf("%s already holds a different %s: pass --force to overwrite", dir, strings.Join(conflicts, ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.Data) {
			fmt.Fprintf(out, "INFO   %s unchanged\n", path)
			continue
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		fmt.Fprintf(out, "INFO   %s written\n", path)
	}
	return nil
}

func newBundleExportCmd(g *globalOptions) *cobra.Command {
	var peer, output string
	var timeout = defaultTimeout
	cmd := &cobra.Command{
		Use:   "export --peer ID -o FILE",
		Short: "Write what the peer needs from this cluster into one file",
		Long: `Read this cluster and write, in one multi-document YAML file for the peer:
  - this cluster's Configuration (as generate configuration prints it);
  - the PublicKey of this side's gateway for the peer (its public half only);
  - on the server side, the GatewayClient the peer should use, pointing at
    this server's published endpoint, with this side's MTU.
It waits (--timeout) until the controller has generated the key and, for a
server, published the endpoint. The gateway is looked up in -n, by default
liqo-tenant-<peer id>. Use -o - to write to stdout.`,
		Example: `  peerlink bundle export --peer cluster-b -o to-cluster-b.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clusterinfo.ValidateClusterID(peer); err != nil {
				return fmt.Errorf("--peer: %w", err)
			}
			if output == "" {
				return errors.New("--output: a file to write is required (- for stdout)")
			}
			out, progressOut := cmd.OutOrStdout(), cmd.OutOrStdout()
			if output == "-" {
				progressOut = cmd.ErrOrStderr()
			}
			ns := g.Namespace
			if ns == "" {
				ns = generators.TenantNamespace(peer)
			}
			cl, err := g.local().client()
			if err != nil {
				return err
			}
			p := peering.Progress{Out: progressOut, Timeout: timeout}
			objs, err := peering.Export(cmd.Context(), cl, p, g.PeerlinkNamespace, ns, peer)
			if err != nil {
				return err
			}
			data, err := generators.Marshal(generators.FormatYAML, objs...)
			if err != nil {
				return err
			}
			if output == "-" {
				_, err := out.Write(data)
				return err
			}
			if err := os.WriteFile(output, data, 0o644); err != nil {
				return fmt.Errorf("--output: %w", err)
			}
			p.Infof("%s written: send it to the admin of %s", output, peer)
			return nil
		},
	}
	cmd.Flags().StringVar(&peer, "peer", "", "ID of the peer cluster (required)")
	_ = cmd.MarkFlagRequired("peer")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write, - for stdout (required)")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long to wait for the gateway's key and endpoint")
	return cmd
}

// maxPeerFile bounds what bundle add reads of the file a peer sent: three
// small manifests fit in a few kilobytes.
const maxPeerFile = 1 << 20

func newBundleAddCmd() *cobra.Command {
	var allowed []string
	cmd := &cobra.Command{
		Use:   "add DIR FILE",
		Short: "Add what the peer sent to the bundle",
		Long: `Add the objects of FILE (what the peer's bundle export wrote) to the bundle
DIR: each object becomes its own file, listed in kustomization.yaml; an object
already in the bundle is replaced. A GatewayClient from the server only fills
in the endpoint of this bundle's own GatewayClient, keeping its name and
template; if its MTU differs, the server's is taken and that is reported.

Received objects are checked first: kinds (one Configuration, one PublicKey,
one GatewayClient at most), schema, labels for this bundle's peer, canonical
non-zero keys, and the peer's ranges against the allowlist (--allowed-peer-cidr,
default 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10; special-use
ranges never pass). Only the remote-cluster-id label of what the peer sent is
kept, none of its annotations. A file over 1 MiB is refused. Nothing is
written when anything is wrong, and the files are replaced all together.`,
		Example: `  peerlink bundle add peers/cluster-b from-cluster-b.yaml`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, file := args[0], args[1]
			policy, err := peerPolicy(allowed)
			if err != nil {
				return err
			}
			data, err := readLimited(file, maxPeerFile)
			if err != nil {
				return err
			}
			received, err := generators.ParseManifests(data)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if len(received) == 0 {
				return fmt.Errorf("%s: no objects", file)
			}
			kustomization, files, err := readBundle(dir)
			if err != nil {
				return err
			}
			res, err := generators.AddToBundle(kustomization, files, received, policy)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			out := cmd.OutOrStdout()
			written := append(slices.Clone(res.Files), generators.File{Name: generators.KustomizationFile, Data: res.Kustomization})
			if err := replaceFiles(dir, written); err != nil {
				return err
			}
			for _, f := range res.Files {
				fmt.Fprintf(out, "INFO   %s written\n", filepath.Join(dir, f.Name))
			}
			for _, n := range res.Notes {
				fmt.Fprintf(out, "INFO   %s\n", n)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&allowed, "allowed-peer-cidr", nil, "range the peer's CIDRs must lie in (repeatable; default 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10)")
	return cmd
}

// peerPolicy builds the peer-range policy of the --allowed-peer-cidr flag.
func peerPolicy(allowed []string) (rangepolicy.Policy, error) {
	ranges, err := rangepolicy.ParseList(strings.Join(allowed, ","))
	if err != nil {
		return rangepolicy.Policy{}, fmt.Errorf("--allowed-peer-cidr: %w", err)
	}
	if err := rangepolicy.Validate(ranges); err != nil {
		return rangepolicy.Policy{}, fmt.Errorf("--allowed-peer-cidr: %w", err)
	}
	return rangepolicy.Policy{Allowed: ranges}, nil
}

// readLimited reads a file of at most limit bytes; a larger one is refused
// without reading it all.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes: what a peer sends is a few small manifests", path, limit)
	}
	return data, nil
}

// replaceFiles writes files into dir all or nothing: each goes to a
// temporary file beside its target first, and only when all are written are
// they renamed over their targets.
func replaceFiles(dir string, files []generators.File) error {
	var temps []string
	clean := func() {
		for _, t := range temps {
			os.Remove(t)
		}
	}
	for _, f := range files {
		tmp, err := os.CreateTemp(dir, "."+f.Name+".*")
		if err != nil {
			clean()
			return fmt.Errorf("write %s: %w", filepath.Join(dir, f.Name), err)
		}
		temps = append(temps, tmp.Name())
		_, werr := tmp.Write(f.Data)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
			clean()
			return fmt.Errorf("write %s: %w", filepath.Join(dir, f.Name), err)
		}
	}
	for i, f := range files {
		if err := os.Rename(temps[i], filepath.Join(dir, f.Name)); err != nil {
			clean()
			return fmt.Errorf("write %s: %w", filepath.Join(dir, f.Name), err)
		}
	}
	return nil
}

// readBundle reads a bundle's kustomization.yaml and the manifest files it
// lists directly (directories and remote bases are not this bundle's own).
func readBundle(dir string) ([]byte, []generators.ManifestFile, error) {
	kpath := filepath.Join(dir, generators.KustomizationFile)
	kdata, err := os.ReadFile(kpath)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a bundle (run bundle init first): %w", dir, err)
	}
	var k kusttypes.Kustomization
	if err := yaml.Unmarshal(kdata, &k); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", kpath, err)
	}
	var files []generators.ManifestFile
	for _, r := range k.Resources {
		path := filepath.Join(dir, r)
		st, err := os.Stat(path)
		if err != nil || st.IsDir() || filepath.Dir(filepath.Clean(r)) != "." {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		objs, err := generators.ParseManifests(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		files = append(files, generators.ManifestFile{Name: r, Objects: objs})
	}
	return kdata, files, nil
}
