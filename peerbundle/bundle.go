package peerbundle

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/clusterinfo"
	"github.com/peerlink/peerlink/internal/field"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/manifests"
)

// KustomizationFile names the file kustomize reads in a bundle directory.
const KustomizationFile = "kustomization.yaml"

// File is one file of a bundle, by its name inside the bundle directory.
type File struct {
	Name string
	Data []byte
}

// ManifestFile is a parsed manifest file of a bundle.
type ManifestFile struct {
	Name    string
	Objects []*unstructured.Unstructured
}

// fileName is the bundle file of an object of the given kind: one object of
// each kind per peer, so the kind alone names it.
func fileName(kind string) string {
	return strings.ToLower(kind) + ".yaml"
}

// newKustomization returns a kustomization.yaml listing resources.
func newKustomization(resources ...string) []byte {
	var b strings.Builder
	b.WriteString("# A peerlink peer bundle: the objects of one peering on this cluster.\n")
	b.WriteString("# Check it with `peerlink lint`, preview it with `peerlink render`.\n")
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, r := range resources {
		b.WriteString("- " + r + "\n")
	}
	return []byte(b.String())
}

// AddResources appends the files missing from the resources list of a
// kustomization, keeping its other content and its comments.
func AddResources(kustomization []byte, files ...string) ([]byte, error) {
	root, err := kyaml.Parse(string(kustomization))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KustomizationFile, err)
	}
	list, err := root.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, "resources"))
	if err != nil {
		return nil, fmt.Errorf("%s: resources: %w", KustomizationFile, err)
	}
	present := map[string]bool{}
	for _, n := range list.YNode().Content {
		present[n.Value] = true
	}
	for _, f := range files {
		if present[f] {
			continue
		}
		present[f] = true
		list.YNode().Content = append(list.YNode().Content, &kyaml.Node{Kind: kyaml.ScalarNode, Value: f})
	}
	out, err := root.String()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KustomizationFile, err)
	}
	return []byte(out), nil
}

// InitBundle returns the files of a new peer bundle holding this side's
// gateway: the kustomization, the tenant namespace and the gateway.
func InitBundle(gateway runtime.Object) ([]File, error) {
	var ns, kind string
	switch gw := gateway.(type) {
	case *netv1beta1.GatewayServer:
		ns, kind = gw.Namespace, manifests.KindGatewayServer
	case *netv1beta1.GatewayClient:
		ns, kind = gw.Namespace, manifests.KindGatewayClient
	default:
		return nil, fmt.Errorf("a bundle starts from a GatewayServer or a GatewayClient, not %T", gateway)
	}
	nsData, err := manifests.Marshal(manifests.FormatYAML, manifests.Namespace(ns))
	if err != nil {
		return nil, err
	}
	gwData, err := manifests.Marshal(manifests.FormatYAML, gateway)
	if err != nil {
		return nil, err
	}
	nsFile, gwFile := fileName("Namespace"), fileName(kind)
	return []File{
		{Name: KustomizationFile, Data: newKustomization(nsFile, gwFile)},
		{Name: nsFile, Data: nsData},
		{Name: gwFile, Data: gwData},
	}, nil
}

// AddResult is what AddToBundle changes in a bundle.
type AddResult struct {
	// Files are the manifest files to write, new or rewritten, by name.
	Files []File
	// Kustomization is the new kustomization.yaml.
	Kustomization []byte
	// Notes tell the user what changed beyond adding files.
	Notes []string
}

type located struct {
	file  string
	index int
}

// AddToBundle merges what a peer sent (its Configuration, its PublicKey and,
// from a server, the GatewayClient to use) into a bundle. Received objects
// are validated, stripped of server-owned metadata and moved into the
// bundle's namespace (without one, the tenant namespace of the peer,
// liqo-tenant-<peer>). The peer gives a client only its server's endpoint
// and the MTU, the same way whether the bundle holds a gateway or not: a
// received GatewayClient fills in the endpoint of the bundle's own client,
// keeping its name, namespace, template, key Secret and replicas, or, in a
// bundle without a gateway, of a client made with this side's defaults
// (the default template, a key pair generated in-cluster, one replica). Its
// MTU is taken when it differs, since both sides must agree and the server
// is already set, and that is reported in Notes. A bundle holds one
// Configuration and one PublicKey of its peer: a received one replaces the
// bundle's, under the bundle's name, so that an add after the peer rotated
// its key leaves one key. Nothing is returned on error.
//
// What a peer sends is input from outside this cluster's trust: at most one
// object of each kind, Configuration ranges the policy accepts (see package
// rangepolicy), and only the liqo.io/remote-cluster-id label is kept.
func AddToBundle(kustomization []byte, files []ManifestFile, received []*unstructured.Unstructured, policy rangepolicy.Policy) (*AddResult, error) {
	content := map[string][]*unstructured.Unstructured{}
	byKey := map[string]located{}
	// peering are the peering objects of the bundle, in file order.
	var peering []located
	var gateway *located
	var gatewayKind, peer, namespace string
	for _, f := range files {
		content[f.Name] = f.Objects
		for i, u := range f.Objects {
			if !manifests.IsPeeringKind(u) {
				continue
			}
			loc := located{f.Name, i}
			byKey[u.GetKind()+"/"+u.GetName()] = loc
			peering = append(peering, loc)
			if peer == "" {
				peer = u.GetLabels()[netv1beta1.RemoteClusterIDLabel]
			}
			if namespace == "" {
				namespace = u.GetNamespace()
			}
			if u.GetKind() == manifests.KindGatewayServer || u.GetKind() == manifests.KindGatewayClient {
				if gateway != nil {
					return nil, fmt.Errorf("%s: a second gateway (%s %s) for the same peer: a bundle holds one", f.Name, u.GetKind(), u.GetName())
				}
				gateway, gatewayKind = &loc, u.GetKind()
				peer = u.GetLabels()[netv1beta1.RemoteClusterIDLabel]
				namespace = u.GetNamespace()
			}
		}
	}

	res := &AddResult{}
	changed := map[string]bool{}
	var added []string
	// place puts a new object into its own file, listed in the
	// kustomization.
	place := func(doc string, obj *unstructured.Unstructured) (located, error) {
		name := fileName(obj.GetKind())
		if _, taken := content[name]; taken {
			name = strings.ToLower(obj.GetKind()) + "-" + obj.GetName() + ".yaml"
		}
		if _, taken := content[name]; taken {
			return located{}, fmt.Errorf("%s: file %s already exists in the bundle with other objects", doc, name)
		}
		content[name] = []*unstructured.Unstructured{obj}
		loc := located{name, 0}
		byKey[obj.GetKind()+"/"+obj.GetName()] = loc
		changed[name] = true
		added = append(added, name)
		return loc, nil
	}
	seen := map[string]string{}
	for i, u := range received {
		doc := fmt.Sprintf("document %d (%s %s)", i+1, u.GetKind(), u.GetName())
		if err := checkReceived(u, policy); err != nil {
			return nil, fmt.Errorf("%s: %w", doc, err)
		}
		if first, ok := seen[u.GetKind()]; ok {
			return nil, fmt.Errorf("%s: a second %s after %s: a peer sends one Configuration, one PublicKey and one GatewayClient", doc, u.GetKind(), first)
		}
		seen[u.GetKind()] = doc
		id := u.GetLabels()[netv1beta1.RemoteClusterIDLabel]
		if peer == "" {
			// A bundle without a labelled object takes its peer from the
			// first object received; the others must agree.
			if err := clusterinfo.ValidateClusterID(id); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", doc, manifests.RemoteClusterIDPath(), err)
			}
			peer = id
		} else if id != peer {
			return nil, fmt.Errorf("%s: %s is %q but this bundle is for peer %q", doc, manifests.RemoteClusterIDPath(), id, peer)
		}
		if namespace == "" {
			namespace = manifests.TenantNamespace(peer)
			res.Notes = append(res.Notes, fmt.Sprintf("the bundle names no namespace: what the peer sent goes to %s, the tenant namespace of %s", namespace, peer))
		}
		obj := cleanReceived(u)
		if obj.GetNamespace() != namespace {
			res.Notes = append(res.Notes, fmt.Sprintf("%s %s: namespace %s replaced by the bundle's %s", obj.GetKind(), obj.GetName(), obj.GetNamespace(), namespace))
			obj.SetNamespace(namespace)
		}

		switch obj.GetKind() {
		case manifests.KindGatewayClient:
			if gatewayKind == manifests.KindGatewayServer {
				return nil, fmt.Errorf("%s: this bundle is the server side of the peering; a GatewayClient belongs in the peer's bundle", doc)
			}
			if gateway == nil {
				local, err := defaultClient(peer, namespace)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", doc, err)
				}
				loc, err := place(doc, local)
				if err != nil {
					return nil, err
				}
				gateway, gatewayKind = &loc, manifests.KindGatewayClient
				res.Notes = append(res.Notes, fmt.Sprintf("%s %s/%s: the bundle has no gateway: made one with this side's defaults (the default template, a key pair generated in the cluster, one replica)",
					local.GetKind(), local.GetNamespace(), local.GetName()))
			}
			local := content[gateway.file][gateway.index]
			notes, err := takeEndpoint(local, obj)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", doc, err)
			}
			res.Notes = append(res.Notes, notes...)
			changed[gateway.file] = true
			continue
		case manifests.KindConfiguration, manifests.KindPublicKey:
			// One of each per peer: the controller and the gateway stop at
			// two, so a received one replaces the bundle's.
			var mine []located
			for _, loc := range peering {
				if o := content[loc.file][loc.index]; o.GetKind() == obj.GetKind() {
					if l := o.GetLabels()[netv1beta1.RemoteClusterIDLabel]; l == peer || l == "" {
						mine = append(mine, loc)
					}
				}
			}
			if len(mine) > 1 {
				var where []string
				for _, loc := range mine {
					where = append(where, fmt.Sprintf("%s in %s", content[loc.file][loc.index].GetName(), loc.file))
				}
				return nil, fmt.Errorf("%s: the bundle already holds %d %ss of peer %s (%s): a peer has one; keep one and add again",
					doc, len(mine), obj.GetKind(), peer, strings.Join(where, ", "))
			}
			if len(mine) == 1 {
				loc := mine[0]
				if old := content[loc.file][loc.index].GetName(); old != obj.GetName() {
					res.Notes = append(res.Notes, fmt.Sprintf("%s %s: replaces %s %s of the bundle, whose name it keeps", obj.GetKind(), obj.GetName(), obj.GetKind(), old))
					obj.SetName(old)
				}
				content[loc.file][loc.index] = obj
				changed[loc.file] = true
				continue
			}
		}
		if loc, ok := byKey[obj.GetKind()+"/"+obj.GetName()]; ok {
			content[loc.file][loc.index] = obj
			changed[loc.file] = true
			continue
		}
		if _, err := place(doc, obj); err != nil {
			return nil, err
		}
	}

	for _, name := range slices.Sorted(maps.Keys(changed)) {
		docs := make([]map[string]any, len(content[name]))
		for i, u := range content[name] {
			docs[i] = u.Object
		}
		data, err := manifests.MarshalManifests(manifests.FormatYAML, docs...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		res.Files = append(res.Files, File{Name: name, Data: data})
	}
	k, err := AddResources(kustomization, added...)
	if err != nil {
		return nil, err
	}
	res.Kustomization = k
	return res, nil
}

// defaultClient is the GatewayClient bundle init --role client makes with
// its defaults, for a bundle that has none when the server's arrives.
func defaultClient(peer, namespace string) (*unstructured.Unstructured, error) {
	gw, err := manifests.GatewayClient(manifests.GatewayClientOptions{
		Peer: manifests.Peer{RemoteClusterID: peer, Namespace: namespace},
		MTU:  netv1beta1.DefaultMTU,
	})
	if err != nil {
		return nil, err
	}
	m, err := manifests.Manifest(gw)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// checkReceived refuses anything a peer must not send: other kinds (a
// Secret could carry a private key), a GatewayServer, an invalid object, a
// range the policy refuses, or an MTU of 0 written out (a zero MTU would
// otherwise read as "the default").
func checkReceived(u *unstructured.Unstructured, policy rangepolicy.Policy) error {
	if !manifests.IsPeeringKind(u) {
		return fmt.Errorf("a peer sends only Configuration, PublicKey and GatewayClient objects, not %s", u.GetKind())
	}
	switch u.GetKind() {
	case manifests.KindConfiguration, manifests.KindPublicKey, manifests.KindGatewayClient:
	default:
		return fmt.Errorf("a peer sends only Configuration, PublicKey and GatewayClient objects, not %s", u.GetKind())
	}
	if errs := manifests.ValidateKeyText(u); len(errs) > 0 {
		return errs.ToAggregate()
	}
	if mtu, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "mtu"); found && (mtu == nil || fmt.Sprint(mtu) == "0") {
		return fmt.Errorf("spec.mtu: %v is not an MTU: leave it out for the default %d", mtu, netv1beta1.DefaultMTU)
	}
	obj, unknown, err := manifests.DecodeStrict(u)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return unknown[0]
	}
	if errs := manifests.Validate(obj); len(errs) > 0 {
		return errs.ToAggregate()
	}
	if conf, ok := obj.(*netv1beta1.Configuration); ok {
		return CheckPeerRanges(conf, policy)
	}
	return nil
}

// CheckPeerRanges checks the ranges a peer declares in a Configuration
// against the policy; the error names the field and the rule.
func CheckPeerRanges(conf *netv1beta1.Configuration, policy rangepolicy.Policy) error {
	var errs []error
	for _, r := range peerRangeErrors(conf, policy) {
		errs = append(errs, fmt.Errorf("%s: %w", r.field, r.err))
	}
	return errors.Join(errs...)
}

// PeerConfiguration builds the Configuration of a peer from its pod and
// external CIDRs as given (repeated values, each may be a comma-separated
// list), holds each range to policy, and returns it with where each range
// goes (PeerRangePlacements). Errors name the list, PodCIDRs or
// ExternalCIDRs (*field.Error; a range the policy refuses is a
// *rangepolicy.Refusal under it), or are the object's
// *manifests.InvalidError.
func PeerConfiguration(p manifests.Peer, pods, external []string, policy rangepolicy.Policy) (*netv1beta1.Configuration, []string, error) {
	podCIDRs, err := manifests.ParseCIDRList(pods...)
	if err != nil {
		return nil, nil, field.New("PodCIDRs", "", err)
	}
	if len(podCIDRs) == 0 {
		return nil, nil, field.New("PodCIDRs", "", errors.New("at least one pod CIDR of the peer is needed"))
	}
	externalCIDRs, err := manifests.ParseCIDRList(external...)
	if err != nil {
		return nil, nil, field.New("ExternalCIDRs", "", err)
	}
	conf, err := manifests.Configuration(manifests.ConfigurationOptions{Peer: p, PodCIDRs: podCIDRs, ExternalCIDRs: externalCIDRs})
	if err != nil {
		return nil, nil, err
	}
	for i, ranges := range [][]netip.Prefix{podCIDRs, externalCIDRs} {
		for _, r := range ranges {
			if err := policy.Check(r); err != nil {
				return nil, nil, field.New([]string{"PodCIDRs", "ExternalCIDRs"}[i], "", err)
			}
		}
	}
	return conf, PeerRangePlacements(conf, policy), nil
}

// PeerRangePlacements says, for each range a peer declares in a
// Configuration, where this cluster's controller puts it under policy:
// "spec.remote.cidr.pod[0] 10.245.0.0/16: routed as it is (in plan
// 10.244.0.0/15)", or "...: remapped". A range in the plan is still
// remapped when it collides with a range of this cluster, which only the
// controller knows.
func PeerRangePlacements(conf *netv1beta1.Configuration, policy rangepolicy.Policy) []string {
	var out []string
	eachRemoteRange(conf, func(field string, p netip.Prefix) {
		if policy.Check(p) == nil {
			out = append(out, fmt.Sprintf("%s %s: %s", field, p, policy.Placement(p)))
		}
	})
	return out
}

// rangeError is a range of spec.remote the policy refuses, by its field.
type rangeError struct {
	field string
	err   error
}

func peerRangeErrors(conf *netv1beta1.Configuration, policy rangepolicy.Policy) []rangeError {
	var out []rangeError
	eachRemoteRange(conf, func(field string, p netip.Prefix) {
		if err := policy.Check(p); err != nil {
			out = append(out, rangeError{field, err})
		}
	})
	return out
}

// eachRemoteRange calls fn with each range of conf's spec.remote that
// parses, and its field; Validate reports those that do not.
func eachRemoteRange(conf *netv1beta1.Configuration, fn func(field string, p netip.Prefix)) {
	for _, l := range []struct {
		name  string
		cidrs []netv1beta1.CIDR
	}{{"pod", conf.Spec.Remote.CIDR.Pod}, {"external", conf.Spec.Remote.CIDR.External}} {
		for i, s := range l.cidrs {
			if p, err := manifests.ParseCIDR(string(s)); err == nil {
				fn(fmt.Sprintf("spec.remote.cidr.%s[%d]", l.name, i), p)
			}
		}
	}
}

// cleanReceived keeps what peerlink reads of a received object: its name,
// namespace, spec, and the label liqo.io/remote-cluster-id. Nothing else of
// the peer's metadata is taken, whatever its value: an annotation such as
// config.kubernetes.io/local-config would drop the object from the build,
// Argo CD or Flux annotations would steer how this cluster applies it, and
// labels are this cluster's to select by.
func cleanReceived(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range u.Object {
		if k != "metadata" && k != "status" {
			out.Object[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetLabels(map[string]string{netv1beta1.RemoteClusterIDLabel: u.GetLabels()[netv1beta1.RemoteClusterIDLabel]})
	return out
}

// takeEndpoint copies the server endpoint of a received GatewayClient into
// the bundle's own client, and the MTU when it differs.
func takeEndpoint(local, received *unstructured.Unstructured) ([]string, error) {
	ref := fmt.Sprintf("%s %s/%s", local.GetKind(), local.GetNamespace(), local.GetName())
	ep, found, err := unstructured.NestedMap(received.Object, "spec", "endpoint")
	if err != nil || !found {
		return nil, fmt.Errorf("spec.endpoint: missing in the received GatewayClient")
	}
	if err := unstructured.SetNestedMap(local.Object, ep, "spec", "endpoint"); err != nil {
		return nil, fmt.Errorf("%s: spec.endpoint: %w", ref, err)
	}
	var typed netv1beta1.GatewayClientEndpoint
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ep, &typed); err != nil {
		return nil, fmt.Errorf("spec.endpoint of the received GatewayClient: %w", err)
	}
	notes := []string{fmt.Sprintf("%s: endpoint set to %s port %d", ref, strings.Join(typed.Addresses, ","), typed.Resolved().Port)}
	spec, _, _ := unstructured.NestedMap(received.Object, "spec")
	var ignored []string
	for _, k := range slices.Sorted(maps.Keys(spec)) {
		if k != "endpoint" && k != "mtu" {
			ignored = append(ignored, "spec."+k)
		}
	}
	if len(ignored) > 0 {
		notes = append(notes, fmt.Sprintf("%s: %s of the peer's GatewayClient not taken: they are this side's to choose", ref, strings.Join(ignored, ", ")))
	}

	peerMTU, found, _ := unstructured.NestedInt64(received.Object, "spec", "mtu")
	if !found {
		return notes, nil
	}
	localMTU, _, _ := unstructured.NestedInt64(local.Object, "spec", "mtu")
	localMTU = int64(netv1beta1.EffectiveMTU(int(localMTU)))
	if localMTU != peerMTU {
		if err := unstructured.SetNestedField(local.Object, peerMTU, "spec", "mtu"); err != nil {
			return nil, fmt.Errorf("%s: spec.mtu: %w", ref, err)
		}
		notes = append(notes, fmt.Sprintf("%s: spec.mtu changed from %d to the server's %d: both sides must agree", ref, localMTU, peerMTU))
	}
	return notes, nil
}
