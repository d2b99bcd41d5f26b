package peerbundle

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/types"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/ipam"
	"github.com/peerlink/peerlink/manifests"
)

// RenderBundle returns what the controller creates for the bundle in dir:
// the WgGatewayServer or WgGatewayClient rendered from each gateway's
// template, and, when the local facts are known (info not nil), each
// Configuration with the status.remote the controller would write, as long
// as no other peer holds ranges yet: a range is kept as it is only inside
// the address plan the facts carry (routedPeerCIDRs), as the controller
// keeps it.
func RenderBundle(dir string, info *clusterinfo.Info) ([]map[string]any, error) {
	var ledger *ipam.Ledger
	if info != nil {
		alloc, err := ipam.NewPlanned(ipam.DefaultPools(), info.RoutedPeer, info.Ranges())
		if err != nil {
			return nil, fmt.Errorf("cluster info: %w", err)
		}
		ledger = ipam.NewLedger(alloc)
	}
	objs, err := buildBundle(dir)
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", dir, err)
	}
	sources := make([]renderSource, len(objs))
	for i, o := range objs {
		sources[i] = renderSource{file: o.file, obj: o.u}
	}
	rendered, err := renderGateways(sources, RenderOverrides{})
	if err != nil {
		return nil, err
	}
	var docs []map[string]any
	for _, obj := range rendered {
		docs = append(docs, obj.Object)
	}
	for _, o := range objs {
		if ledger == nil || !manifests.IsPeeringKind(o.u) || o.u.GetKind() != manifests.KindConfiguration {
			continue
		}
		obj, _, err := manifests.DecodeStrict(o.u)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", o.file, o.ref(), err)
		}
		m, err := remappedConfiguration(ledger, info.PeerPolicy(), obj.(*netv1beta1.Configuration))
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", o.file, o.ref(), err)
		}
		docs = append(docs, m)
	}
	return docs, nil
}

// remappedConfiguration returns the manifest of conf with the status.remote
// the controller would write, from the ranges the ledger assigns; ranges the
// peer policy refuses are refused here too, as the controller would.
func remappedConfiguration(ledger *ipam.Ledger, policy rangepolicy.Policy, conf *netv1beta1.Configuration) (map[string]any, error) {
	if err := CheckPeerRanges(conf, policy); err != nil {
		return nil, err
	}
	c := conf.Spec.Remote.CIDR
	var wants []netip.Prefix
	for _, s := range append(append([]netv1beta1.CIDR{}, c.Pod...), c.External...) {
		p, err := manifests.ParseCIDR(string(s))
		if err != nil {
			return nil, err
		}
		wants = append(wants, p)
	}
	got, err := ledger.Assign(types.NamespacedName{Namespace: conf.Namespace, Name: conf.Name}.String(), wants)
	if err != nil {
		return nil, fmt.Errorf("remap spec.remote: %w", err)
	}
	status := ipam.RemoteStatus(len(c.Pod), got)
	m, err := manifests.Manifest(conf)
	if err != nil {
		return nil, err
	}
	remote, err := manifests.Manifest(&netv1beta1.Configuration{Spec: netv1beta1.ConfigurationSpec{Remote: *status}})
	if err != nil {
		return nil, err
	}
	spec, _ := remote["spec"].(map[string]any)
	m["status"] = map[string]any{"remote": spec["remote"]}
	return m, nil
}
