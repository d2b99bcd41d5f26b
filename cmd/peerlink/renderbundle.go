package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/generators"
	"github.com/peerlink/peerlink/ipam"
	"github.com/peerlink/peerlink/peering"
)

// addBundleRendering extends the render command with `peerlink render DIR`:
// the gateways of a peer bundle, built with kustomize, rendered as with -f,
// and with --cluster-info the remapping of its Configurations.
func addBundleRendering(render *cobra.Command) {
	var clusterInfo string
	renderFiles := render.RunE
	render.Use = "render (DIR | -f FILE [-f FILE ...])"
	render.Long += `

With DIR, a peer bundle (a kustomize directory) is built and its gateways
rendered with the bundle's own templates, else the defaults. With
--cluster-info FILE (a saved cluster-info ConfigMap, or the output of
peerlink info -o yaml) each Configuration of the bundle is printed too, with
the status.remote the controller would write: where the peer's ranges land in
this cluster, as long as no other peer holds ranges yet.`
	render.Example += `

  # What the controller will create for a peer bundle, and the remapping
  peerlink info -o yaml > cluster-a.yaml
  peerlink render peers/cluster-b --cluster-info cluster-a.yaml`
	render.Args = cobra.MaximumNArgs(1)
	// -f is required only without DIR.
	if f := render.Flags().Lookup("filename"); f != nil {
		delete(f.Annotations, cobra.BashCompOneRequiredFlag)
	}
	render.Flags().StringVar(&clusterInfo, "cluster-info", "", "with DIR: the local cluster's facts, to show how the bundle's Configurations are remapped")
	render.RunE = func(cmd *cobra.Command, args []string) error {
		files, _ := cmd.Flags().GetStringArray("filename")
		switch {
		case len(args) == 1 && len(files) > 0:
			return errors.New("give either DIR or -f, not both")
		case len(args) == 1:
			output, _ := cmd.Flags().GetString("output")
			return renderBundle(cmd.OutOrStdout(), args[0], clusterInfo, output)
		case len(files) == 0:
			return errors.New("a bundle DIR or -f FILE is required")
		case clusterInfo != "":
			return errors.New("--cluster-info: only with a bundle DIR")
		}
		return renderFiles(cmd, args)
	}
}

// renderBundle prints what the controller creates for the bundle in dir:
// the WgGatewayServer or WgGatewayClient rendered from each gateway's
// template, and, when the local facts are known (clusterInfoFile), each
// Configuration with the status.remote the controller would write.
func renderBundle(w io.Writer, dir, clusterInfoFile, output string) error {
	format, err := generators.ParseFormat(output)
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	var ledger *ipam.Ledger
	if clusterInfoFile != "" {
		info, err := readClusterInfoFile(clusterInfoFile)
		if err != nil {
			return fmt.Errorf("--cluster-info: %w", err)
		}
		alloc, err := ipam.New(ipam.DefaultPools(), info.Ranges())
		if err != nil {
			return fmt.Errorf("--cluster-info: %w", err)
		}
		ledger = ipam.NewLedger(alloc)
	}
	objs, err := buildBundle(dir)
	if err != nil {
		return fmt.Errorf("build %s: %w", dir, err)
	}
	sources := make([]renderSource, len(objs))
	for i, o := range objs {
		sources[i] = renderSource{file: o.file, obj: o.u}
	}
	rendered, err := renderGateways(sources, renderOverrides{})
	if err != nil {
		return err
	}
	var manifests []map[string]any
	for _, obj := range rendered {
		manifests = append(manifests, obj.Object)
	}
	for _, o := range objs {
		if ledger == nil || !generators.IsPeeringKind(o.u) || o.u.GetKind() != generators.KindConfiguration {
			continue
		}
		obj, _, err := generators.DecodeStrict(o.u)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", o.file, o.ref(), err)
		}
		m, err := remappedConfiguration(ledger, obj.(*netv1beta1.Configuration))
		if err != nil {
			return fmt.Errorf("%s: %s: %w", o.file, o.ref(), err)
		}
		manifests = append(manifests, m)
	}
	out, err := generators.MarshalManifests(format, manifests...)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// remappedConfiguration returns the manifest of conf with the status.remote
// the controller would write, from the ranges the ledger assigns.
func remappedConfiguration(ledger *ipam.Ledger, conf *netv1beta1.Configuration) (map[string]any, error) {
	c := conf.Spec.Remote.CIDR
	var wants []netip.Prefix
	for _, s := range append(append([]netv1beta1.CIDR{}, c.Pod...), c.External...) {
		p, err := generators.ParseCIDR(string(s))
		if err != nil {
			return nil, err
		}
		wants = append(wants, p)
	}
	got, err := ledger.Assign(types.NamespacedName{Namespace: conf.Namespace, Name: conf.Name}.String(), wants)
	if err != nil {
		return nil, fmt.Errorf("remap spec.remote: %w", err)
	}
	status := netv1beta1.ClusterConfig{}
	for i, p := range got {
		if i < len(c.Pod) {
			status.CIDR.Pod = append(status.CIDR.Pod, netv1beta1.CIDR(p.String()))
		} else {
			status.CIDR.External = append(status.CIDR.External, netv1beta1.CIDR(p.String()))
		}
	}
	m, err := generators.Manifest(conf)
	if err != nil {
		return nil, err
	}
	remote, err := generators.Manifest(&netv1beta1.Configuration{Spec: netv1beta1.ConfigurationSpec{Remote: status}})
	if err != nil {
		return nil, err
	}
	spec, _ := remote["spec"].(map[string]any)
	m["status"] = map[string]any{"remote": spec["remote"]}
	return m, nil
}

// readClusterInfoFile reads the local facts from a saved
// cluster-info ConfigMap or from the output of `info -o yaml`.
func readClusterInfoFile(path string) (clusterinfo.Info, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return clusterinfo.Info{}, err
	}
	var doc struct {
		Kind      string              `json:"kind"`
		Data      map[string]string   `json:"data"`
		ClusterID string              `json:"clusterID"`
		Network   peering.NetworkInfo `json:"network"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return clusterinfo.Info{}, fmt.Errorf("%s: %w", path, err)
	}
	fields := doc.Data
	if doc.Kind != "ConfigMap" {
		fields = map[string]string{
			clusterinfo.KeyClusterID:    doc.ClusterID,
			clusterinfo.KeyPodCIDRs:     strings.Join(doc.Network.PodCIDRs, ","),
			clusterinfo.KeyServiceCIDR:  doc.Network.ServiceCIDR,
			clusterinfo.KeyExternalCIDR: doc.Network.ExternalCIDR,
			clusterinfo.KeyInternalCIDR: doc.Network.InternalCIDR,
		}
	}
	info, err := clusterinfo.Decode(fields)
	if err != nil {
		return clusterinfo.Info{}, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}
