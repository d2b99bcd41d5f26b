package peerbundle

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/generators"
	"github.com/peerlink/peerlink/internal/rangepolicy"
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
		ns, kind = gw.Namespace, generators.KindGatewayServer
	case *netv1beta1.GatewayClient:
		ns, kind = gw.Namespace, generators.KindGatewayClient
	default:
		return nil, fmt.Errorf("a bundle starts from a GatewayServer or a GatewayClient, not %T", gateway)
	}
	nsData, err := generators.Marshal(generators.FormatYAML, generators.Namespace(ns))
	if err != nil {
		return nil, err
	}
	gwData, err := generators.Marshal(generators.FormatYAML, gateway)
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
// bundle's namespace; an object already in the bundle is replaced. A
// received GatewayClient only updates the endpoint of the bundle's own
// client, keeping its template and name; its MTU is taken when it differs,
// since both sides must agree and the server is already set, and that is
// reported in Notes. Nothing is returned on error.
//
// What a peer sends is input from outside this cluster's trust: at most one
// object of each kind, Configuration ranges the policy accepts (see package
// rangepolicy), and only the labels peerlink reads are kept.
func AddToBundle(kustomization []byte, files []ManifestFile, received []*unstructured.Unstructured, policy rangepolicy.Policy) (*AddResult, error) {
	content := map[string][]*unstructured.Unstructured{}
	byKey := map[string]located{}
	var gateway *located
	var gatewayKind, peer, namespace string
	for _, f := range files {
		content[f.Name] = f.Objects
		for i, u := range f.Objects {
			if !generators.IsPeeringKind(u) {
				continue
			}
			loc := located{f.Name, i}
			byKey[u.GetKind()+"/"+u.GetName()] = loc
			if peer == "" {
				peer = u.GetLabels()[netv1beta1.RemoteClusterIDLabel]
			}
			if namespace == "" {
				namespace = u.GetNamespace()
			}
			if u.GetKind() == generators.KindGatewayServer || u.GetKind() == generators.KindGatewayClient {
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
		if id := u.GetLabels()[netv1beta1.RemoteClusterIDLabel]; peer != "" && id != peer {
			return nil, fmt.Errorf("%s: %s is %q but this bundle is for peer %q", doc, generators.RemoteClusterIDPath(), id, peer)
		}
		obj := cleanReceived(u)
		if namespace != "" && obj.GetNamespace() != namespace {
			res.Notes = append(res.Notes, fmt.Sprintf("%s %s: namespace %s replaced by the bundle's %s", obj.GetKind(), obj.GetName(), obj.GetNamespace(), namespace))
			obj.SetNamespace(namespace)
		}

		if obj.GetKind() == generators.KindGatewayClient && gateway != nil {
			if gatewayKind == generators.KindGatewayServer {
				return nil, fmt.Errorf("%s: this bundle is the server side of the peering; a GatewayClient belongs in the peer's bundle", doc)
			}
			local := content[gateway.file][gateway.index]
			notes, err := takeEndpoint(local, obj)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", doc, err)
			}
			res.Notes = append(res.Notes, notes...)
			changed[gateway.file] = true
			continue
		}
		if loc, ok := byKey[obj.GetKind()+"/"+obj.GetName()]; ok {
			content[loc.file][loc.index] = obj
			changed[loc.file] = true
			continue
		}
		name := fileName(obj.GetKind())
		if _, taken := content[name]; taken {
			name = strings.ToLower(obj.GetKind()) + "-" + obj.GetName() + ".yaml"
		}
		if _, taken := content[name]; taken {
			return nil, fmt.Errorf("%s: file %s already exists in the bundle with other objects", doc, name)
		}
		content[name] = []*unstructured.Unstructured{obj}
		byKey[obj.GetKind()+"/"+obj.GetName()] = located{name, 0}
		changed[name] = true
		added = append(added, name)
	}

	for _, name := range slices.Sorted(maps.Keys(changed)) {
		manifests := make([]map[string]any, len(content[name]))
		for i, u := range content[name] {
			manifests[i] = u.Object
		}
		data, err := generators.MarshalManifests(generators.FormatYAML, manifests...)
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

// checkReceived refuses anything a peer must not send: other kinds (a
// Secret could carry a private key), a GatewayServer, an invalid object, a
// range the policy refuses, or an MTU of 0 written out (a zero MTU would
// otherwise read as "the default").
func checkReceived(u *unstructured.Unstructured, policy rangepolicy.Policy) error {
	if !generators.IsPeeringKind(u) {
		return fmt.Errorf("a peer sends only Configuration, PublicKey and GatewayClient objects, not %s", u.GetKind())
	}
	switch u.GetKind() {
	case generators.KindConfiguration, generators.KindPublicKey, generators.KindGatewayClient:
	default:
		return fmt.Errorf("a peer sends only Configuration, PublicKey and GatewayClient objects, not %s", u.GetKind())
	}
	if key, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "publicKey"); found && u.GetKind() == generators.KindPublicKey {
		text, _ := key.(string)
		if _, err := generators.ParsePublicKey(text); err != nil {
			return fmt.Errorf("spec.publicKey: %w", err)
		}
	}
	if mtu, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "mtu"); found && (mtu == nil || fmt.Sprint(mtu) == "0") {
		return fmt.Errorf("spec.mtu: %v is not an MTU: leave it out for the default %d", mtu, netv1beta1.DefaultMTU)
	}
	obj, unknown, err := generators.DecodeStrict(u)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return unknown[0]
	}
	if errs := generators.Validate(obj); len(errs) > 0 {
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
	for _, l := range []struct {
		name  string
		cidrs []netv1beta1.CIDR
	}{{"pod", conf.Spec.Remote.CIDR.Pod}, {"external", conf.Spec.Remote.CIDR.External}} {
		for i, s := range l.cidrs {
			p, err := generators.ParseCIDR(string(s))
			if err != nil {
				continue // Validate reports it
			}
			if err := policy.Check(p); err != nil {
				errs = append(errs, fmt.Errorf("spec.remote.cidr.%s[%d]: %w", l.name, i, err))
			}
		}
	}
	return errors.Join(errs...)
}

// cleanReceived keeps what peerlink reads of a received object: its name,
// namespace, spec, and the labels liqo.io/remote-cluster-id and (on a
// PublicKey) networking.liqo.io/gateway-resource. Nothing else of the
// peer's metadata is taken: an annotation such as
// config.kubernetes.io/local-config would drop the object from the build,
// and Argo CD or Flux annotations would steer how this cluster applies it.
func cleanReceived(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range u.Object {
		if k != "metadata" && k != "status" {
			out.Object[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	labels := map[string]string{netv1beta1.RemoteClusterIDLabel: u.GetLabels()[netv1beta1.RemoteClusterIDLabel]}
	if v, ok := u.GetLabels()[netv1beta1.GatewayResourceLabel]; ok && u.GetKind() == generators.KindPublicKey {
		labels[netv1beta1.GatewayResourceLabel] = v
	}
	out.SetLabels(labels)
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
	addrs, _, _ := unstructured.NestedStringSlice(ep, "addresses")
	port, _, _ := unstructured.NestedFieldNoCopy(ep, "port")
	notes := []string{fmt.Sprintf("%s: endpoint set to %s port %v", ref, strings.Join(addrs, ","), port)}

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
