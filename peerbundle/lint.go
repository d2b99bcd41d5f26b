package peerbundle

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/resource"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/kbuild"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/templates"
)

// originAnnotation is where kustomize records the file an object came from
// when the kustomization asks for buildMetadata: [originAnnotations].
const originAnnotation = "config.kubernetes.io/origin"

// Finding is one problem in a bundle.
type Finding struct {
	// File is the manifest, as a path under the bundle directory.
	File string
	// Object is "Kind namespace/name"; empty for a problem of the bundle.
	Object string
	// Field is the field path; empty for a problem of the whole object.
	Field string
	Msg   string
	// Warning marks what works, but not as written: the bundle may be
	// committed as it is.
	Warning bool
}

// String is the finding as lint prints it: file: object: field: message,
// with "warning: " before the message of a warning.
func (f Finding) String() string {
	parts := []string{f.File}
	if f.Object != "" {
		parts = append(parts, f.Object)
	}
	if f.Field != "" {
		parts = append(parts, f.Field)
	}
	msg := f.Msg
	if f.Warning {
		msg = "warning: " + msg
	}
	return strings.Join(append(parts, msg), ": ")
}

// bundleObject is an object of a built bundle with the file it came from.
type bundleObject struct {
	file string
	u    *unstructured.Unstructured
}

func (o bundleObject) ref() string {
	return fmt.Sprintf("%s %s", o.u.GetKind(), manifests.ObjectRef(o.u.GetNamespace(), o.u.GetName()))
}

func (o bundleObject) finding(path, msg string) Finding {
	return Finding{File: o.file, Object: o.ref(), Field: path, Msg: msg}
}

// buildBundle runs kustomize on dir, with origin annotations so every object
// names its file. Only local files are read: a remote resource, base,
// component or file is refused before anything is fetched (see
// kbuild.CheckLocal).
func buildBundle(dir string) ([]bundleObject, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	objs, err := kbuild.BuildLocalFS(originFS{FileSystem: filesys.MakeFsOnDisk(), root: abs}, abs)
	if err != nil {
		return nil, err
	}
	out := make([]bundleObject, len(objs))
	for i, u := range objs {
		file := dir
		annotations := u.GetAnnotations()
		var origin resource.Origin
		if s, ok := annotations[originAnnotation]; ok && yaml.Unmarshal([]byte(s), &origin) == nil && origin.Path != "" {
			file = filepath.Join(dir, origin.Path)
		}
		delete(annotations, originAnnotation)
		if len(annotations) == 0 {
			annotations = nil
		}
		u.SetAnnotations(annotations)
		out[i] = bundleObject{file: file, u: u}
	}
	return out, nil
}

// originFS is the disk, except that the root kustomization asks kustomize
// to record where each object came from.
type originFS struct {
	filesys.FileSystem
	root string
}

func (f originFS) ReadFile(path string) ([]byte, error) {
	data, err := f.FileSystem.ReadFile(path)
	if err != nil || filepath.Dir(path) != f.root || !slices.Contains(konfig.RecognizedKustomizationFileNames(), filepath.Base(path)) {
		return data, err
	}
	root, err := kyaml.Parse(string(data))
	if err != nil {
		return data, nil // kustomize reports the syntax error itself
	}
	list, err := root.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, "buildMetadata"))
	if err != nil {
		return data, nil
	}
	list.YNode().Content = append(list.YNode().Content, &kyaml.Node{Kind: kyaml.ScalarNode, Value: kusttypes.OriginAnnotations})
	s, err := root.String()
	if err != nil {
		return data, nil
	}
	return []byte(s), nil
}

// Lint builds the bundle in dir with kustomize, from local files only, and
// checks what it produces, the peer's ranges against policy as bundle add
// and the controller check them; each finding names the file, the object
// and the field.
func Lint(dir string, policy rangepolicy.Policy) []Finding {
	objs, err := buildBundle(dir)
	if err != nil {
		return []Finding{buildFinding(dir, err)}
	}
	var findings []Finding
	var typed []typedObject
	for _, o := range objs {
		findings = append(findings, privateKeyFindings(o)...)
		if !manifests.IsPeeringKind(o.u) {
			continue
		}
		t, fs := checkPeeringObject(o, policy)
		findings = append(findings, fs...)
		if t.obj != nil {
			typed = append(typed, t)
		}
	}
	findings = append(findings, namespaceFindings(objs, typed)...)
	findings = append(findings, templateFindings(typed)...)
	findings = append(findings, secretRefFindings(typed)...)
	return append(findings, bundleFindings(typed)...)
}

// BundlePlacements says where this cluster's controller puts each range
// of the peer in the bundle in dir under policy, as PeerRangePlacements
// says it, after the file and the Configuration: "peers/b/conf.yaml:
// Configuration ns/b: peer range spec.remote.cidr.pod[0] 10.244.0.0/24:
// remapped". A Configuration Lint finds invalid, and a range the policy
// refuses, have no placement: Lint reports them. A bundle that does not
// build has none either.
func BundlePlacements(dir string, policy rangepolicy.Policy) []string {
	objs, err := buildBundle(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range objs {
		if !manifests.IsPeeringKind(o.u) || o.u.GetKind() != manifests.KindConfiguration {
			continue
		}
		obj, _, err := manifests.DecodeStrict(o.u)
		conf, ok := obj.(*netv1beta1.Configuration)
		if err != nil || !ok || len(manifests.Validate(conf)) > 0 {
			continue
		}
		for _, p := range PeerRangePlacements(conf, policy) {
			out = append(out, fmt.Sprintf("%s: %s: peer range %s", o.file, o.ref(), p))
		}
	}
	return out
}

// secretRefFindings warns of a gateway whose key pair comes from a Secret
// the bundle does not make (and must not: lint refuses private keys): the
// controller generates the pair in the cluster when spec.secretRef is
// empty, and a reference a peer wrote could name another gateway's keys.
func secretRefFindings(typed []typedObject) []Finding {
	var findings []Finding
	for _, t := range typed {
		var ref string
		switch gw := t.obj.(type) {
		case *netv1beta1.GatewayServer:
			ref = gw.Spec.SecretRef.Name
		case *netv1beta1.GatewayClient:
			ref = gw.Spec.SecretRef.Name
		}
		if ref == "" {
			continue
		}
		f := t.finding("spec.secretRef.name", fmt.Sprintf("the key pair comes from Secret %q, which is not in the bundle: leave spec.secretRef empty and the controller generates the pair in the cluster; a peer never chooses it", ref))
		f.Warning = true
		findings = append(findings, f)
	}
	return findings
}

// templateFindings warns of a gateway whose template reference names the
// default template in a namespace that is neither peerlink's nor the
// gateway's, as Liqo's manifests name liqo: where that namespace does not
// exist, the controller renders its installed default instead.
func templateFindings(typed []typedObject) []Finding {
	var findings []Finding
	for _, t := range typed {
		var ref corev1.ObjectReference
		var field string
		var server bool
		switch gw := t.obj.(type) {
		case *netv1beta1.GatewayServer:
			ref, field, server = templates.ServerTemplateRef(&gw.Spec, templates.InstallNamespace), "spec.serverTemplateRef.namespace", true
		case *netv1beta1.GatewayClient:
			ref, field = templates.ClientTemplateRef(&gw.Spec, templates.InstallNamespace), "spec.clientTemplateRef.namespace"
		default:
			continue
		}
		if ref.Namespace == templates.InstallNamespace || ref.Namespace == t.u.GetNamespace() {
			continue
		}
		if !templates.IsDefaultTemplate(ref, server) {
			f := t.finding(field, fmt.Sprintf("%q is neither the gateway's namespace nor peerlink's (%s): the controller renders templates only from those two and stalls the gateway with %s",
				ref.Namespace, templates.InstallNamespace, "TemplateNotAllowed"))
			f.Warning = true
			findings = append(findings, f)
			continue
		}
		f := t.finding(field, fmt.Sprintf("%q holds no peerlink template: where namespace %s does not exist, the controller renders its installed default %s %s/%s instead and sets the condition %s; leave the namespace out to say so",
			ref.Namespace, ref.Namespace, ref.Kind, templates.InstallNamespace, ref.Name, netv1beta1.ConditionTemplateSubstituted))
		f.Warning = true
		findings = append(findings, f)
	}
	return findings
}

// namespaceFindings reports objects in a namespace the bundle neither
// creates (a Namespace of the bundle) nor holds its gateway in: applied
// with the rights of whoever syncs the bundle, such an object lands where
// the peering has no business.
func namespaceFindings(objs []bundleObject, typed []typedObject) []Finding {
	own := map[string]bool{}
	for _, o := range objs {
		if o.u.GetAPIVersion() == "v1" && o.u.GetKind() == "Namespace" {
			own[o.u.GetName()] = true
		}
	}
	for _, t := range typed {
		if k := t.u.GetKind(); k == manifests.KindGatewayServer || k == manifests.KindGatewayClient {
			own[t.u.GetNamespace()] = true
		}
	}
	var findings []Finding
	reported := map[*unstructured.Unstructured]bool{}
	peer := bundlePeer(typed)
	for _, t := range typed {
		if fs := peeringNamespaceFindings(t, peer); len(fs) > 0 {
			findings = append(findings, fs...)
			reported[t.u] = true
		}
	}
	if len(own) == 0 {
		return findings
	}
	names := slices.Sorted(maps.Keys(own))
	for _, o := range objs {
		if ns := o.u.GetNamespace(); ns != "" && !own[ns] && !reported[o.u] {
			findings = append(findings, o.finding("metadata.namespace", fmt.Sprintf(
				"%q is neither created by the bundle nor its gateway's (%s)", ns, strings.Join(names, ", "))))
		}
	}
	return findings
}

// peeringNamespaceFindings reports a peering object in a namespace it has
// no business in: a kube- namespace, which Kubernetes keeps for itself, or
// the tenant namespace of another peer (liqo-tenant-<id> where id is not
// the object's peer), as a peer's export names the namespace of its own
// cluster; bundle add moves what it takes into this bundle's namespace.
// The object's label is taken for its peer only when it names the
// bundle's peer: a wrong label is reported on its own (bundleFindings).
func peeringNamespaceFindings(t typedObject, bundlePeer string) []Finding {
	ns := t.u.GetNamespace()
	if strings.HasPrefix(ns, "kube-") {
		return []Finding{t.finding("metadata.namespace", fmt.Sprintf(
			"%q is a namespace Kubernetes keeps for itself: the objects of a peering go to its tenant namespace, %s", ns, manifests.TenantNamespace(cmp.Or(t.peer(), "<peer>"))))}
	}
	if id, ok := strings.CutPrefix(ns, netv1beta1.TenantNamespacePrefix); ok && t.peer() != "" && t.peer() == bundlePeer && id != t.peer() {
		return []Finding{t.finding("metadata.namespace", fmt.Sprintf(
			"%q is the tenant namespace of %s, but the object is for peer %s: a peer's export names its own namespace, and bundle add moves what it takes to %s",
			ns, id, t.peer(), manifests.TenantNamespace(t.peer())))}
	}
	return nil
}

// buildFinding reports a bundle kustomize cannot build, with paths relative
// to the bundle so the message reads the same on every machine.
func buildFinding(dir string, err error) Finding {
	var remote *kbuild.RemoteError
	if errors.As(err, &remote) {
		file := remote.File
		if abs, aerr := filepath.Abs(dir); aerr == nil {
			if rel, rerr := filepath.Rel(abs, file); rerr == nil {
				file = filepath.Join(dir, rel)
			}
		}
		return Finding{File: file, Field: remote.Field, Msg: fmt.Sprintf(
			"%q is %s: lint and render read local files only and fetch nothing; vendor it into the bundle", remote.Entry, remote.What)}
	}
	msg := err.Error()
	if abs, aerr := filepath.Abs(dir); aerr == nil {
		msg = strings.TrimPrefix(msg, "kustomize build "+abs+": ")
		msg = strings.ReplaceAll(msg, abs+string(filepath.Separator), "")
	}
	return Finding{File: filepath.Join(dir, KustomizationFile), Msg: "kustomize build failed: " + msg}
}

// typedObject is a peering object decoded into its Go type.
type typedObject struct {
	bundleObject
	obj interface{ GetLabels() map[string]string }
}

func (t typedObject) peer() string {
	return t.obj.GetLabels()[netv1beta1.RemoteClusterIDLabel]
}

// checkPeeringObject decodes a networking.liqo.io object strictly and
// validates it, a Configuration's ranges against policy too.
func checkPeeringObject(o bundleObject, policy rangepolicy.Policy) (typedObject, []Finding) {
	// Keys are checked as written, first: one that is not base64 would fail
	// decoding with a message naming no field, and one in a form the CRD
	// refuses (a line break, trailing bits) would decode.
	if errs := manifests.ValidateKeyText(o.u); len(errs) > 0 {
		var findings []Finding
		for _, e := range errs {
			findings = append(findings, o.finding(e.Field, e.ErrorBody()))
		}
		return typedObject{}, findings
	}
	obj, unknown, err := manifests.DecodeStrict(o.u)
	if err != nil {
		path := ""
		if !manifests.IsPeeringKind(o.u) || o.u.GroupVersionKind().Version != netv1beta1.GroupVersion.Version {
			path = "apiVersion"
		}
		return typedObject{}, []Finding{o.finding(path, err.Error())}
	}
	var findings []Finding
	for _, u := range unknown {
		findings = append(findings, strictFinding(o, u))
	}
	errs := manifests.Validate(obj)
	for _, e := range errs {
		findings = append(findings, o.finding(e.Field, e.ErrorBody()))
	}
	if conf, ok := obj.(*netv1beta1.Configuration); ok && len(errs) == 0 {
		for _, r := range peerRangeErrors(conf, policy) {
			findings = append(findings, o.finding(r.field, r.err.Error()))
		}
	}
	labelled, ok := obj.(interface{ GetLabels() map[string]string })
	if !ok {
		return typedObject{}, findings
	}
	return typedObject{bundleObject: o, obj: labelled}, findings
}

// strictFinding reports a field the schema does not have, or has twice,
// with its path in the field slot: `unknown field "spec.mtuu"` names
// spec.mtuu.
func strictFinding(o bundleObject, err error) Finding {
	msg := err.Error()
	for _, kind := range []string{"unknown field", "duplicate field"} {
		if rest, ok := strings.CutPrefix(msg, kind+` "`); ok {
			if path, _, ok := strings.Cut(rest, `"`); ok {
				return o.finding(path, kind+": not in the "+netv1beta1.GroupVersion.String()+" "+o.u.GetKind()+" schema")
			}
		}
	}
	return o.finding("", msg)
}

// privateKeyFindings refuses private keys in any object: keys are generated
// in the cluster and only public keys travel.
func privateKeyFindings(o bundleObject) []Finding {
	var findings []Finding
	if o.u.GetKind() == "Secret" && o.u.GetAPIVersion() == "v1" {
		for _, section := range []string{"data", "stringData"} {
			if _, ok, _ := unstructured.NestedFieldNoCopy(o.u.Object, section, netv1beta1.PrivateKeyField); ok {
				findings = append(findings, o.finding(section+"."+netv1beta1.PrivateKeyField,
					"a gateway private key must not be in a manifest: leave the gateway's spec.secretRef empty and the controller generates the key pair in the cluster"))
			}
		}
		return findings
	}
	walkFields(o.u.Object, nil, func(path []string) {
		if strings.EqualFold(path[len(path)-1], netv1beta1.PrivateKeyField) {
			findings = append(findings, o.finding(strings.Join(path, "."),
				"a privateKey field must not be in a manifest: private keys never leave the cluster that generated them"))
		}
	})
	return findings
}

// walkFields calls fn with the path of every map key, depth first, in
// sorted order so findings are stable.
func walkFields(v any, path []string, fn func([]string)) {
	switch node := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(node))
		for k := range node {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := append(slices.Clone(path), k)
			fn(p)
			walkFields(node[k], p, fn)
		}
	case []any:
		for i, item := range node {
			if len(path) == 0 {
				continue
			}
			p := slices.Clone(path)
			p[len(p)-1] = fmt.Sprintf("%s[%d]", p[len(p)-1], i)
			walkFields(item, p, fn)
		}
	}
}

// bundleFindings checks the objects of one bundle together: one gateway,
// one peer.
func bundleFindings(objs []typedObject) []Finding {
	var findings []Finding
	var gateway *typedObject
	for i := range objs {
		o := &objs[i]
		switch o.obj.(type) {
		case *netv1beta1.GatewayServer, *netv1beta1.GatewayClient:
			if gateway != nil {
				findings = append(findings, o.finding("", fmt.Sprintf(
					"a second gateway for the peer, besides %s in %s: a bundle holds one GatewayServer or one GatewayClient", gateway.ref(), gateway.file)))
				continue
			}
			gateway = o
		}
	}
	// One Configuration and one PublicKey per peer: with two, the
	// controller stalls the younger Configuration and the gateway stops.
	first := map[string]*typedObject{}
	for i := range objs {
		o := &objs[i]
		kind := o.u.GetKind()
		if kind != manifests.KindConfiguration && kind != manifests.KindPublicKey {
			continue
		}
		key := kind + "/" + o.peer()
		if f, dup := first[key]; dup {
			findings = append(findings, o.finding("", fmt.Sprintf(
				"a second %s for peer %q, besides %s in %s: a peer has one, and the gateway stops at two", kind, o.peer(), f.ref(), f.file)))
			continue
		}
		first[key] = o
	}
	ref := peerObject(objs)
	if ref == nil {
		return findings
	}
	for _, o := range objs {
		if id := o.peer(); id != "" && id != ref.peer() {
			findings = append(findings, o.finding(manifests.RemoteClusterIDPath().String(), fmt.Sprintf(
				"%q does not match %q of %s in %s: every object of a bundle is for the same peer", id, ref.peer(), ref.ref(), ref.file)))
		}
	}
	return findings
}

// peerObject is the object that names the peer of a bundle: its gateway;
// without one, the first labelled object. Nil when none has a label.
func peerObject(objs []typedObject) *typedObject {
	// The first gateway decides; a second one is reported.
	if i := slices.IndexFunc(objs, func(o typedObject) bool {
		switch o.obj.(type) {
		case *netv1beta1.GatewayServer, *netv1beta1.GatewayClient:
			return true
		}
		return false
	}); i >= 0 && objs[i].peer() != "" {
		return &objs[i]
	}
	for i := range objs {
		if objs[i].peer() != "" {
			return &objs[i]
		}
	}
	return nil
}

// bundlePeer is the peer a bundle is for, as peerObject names it.
func bundlePeer(objs []typedObject) string {
	if o := peerObject(objs); o != nil {
		return o.peer()
	}
	return ""
}

// LintPair checks the bundles of the two sides of one peering against
// each other.
func LintPair(dirA, dirB string) []Finding {
	a, errA := bundleGateway(dirA)
	b, errB := bundleGateway(dirB)
	if errA != nil || errB != nil || a == nil || b == nil {
		// Build and decoding problems are already reported by lintBundle.
		return nil
	}
	if a.peer() == b.peer() {
		return []Finding{b.finding(manifests.RemoteClusterIDPath().String(), fmt.Sprintf(
			"both bundles are for peer %q: --peer-bundle is the other cluster's bundle, whose label names this cluster", a.peer()))}
	}
	server, okS := a.obj.(*netv1beta1.GatewayServer)
	client, okC := b.obj.(*netv1beta1.GatewayClient)
	serverSide, clientSide := a, b
	if !okS || !okC {
		server, okS = b.obj.(*netv1beta1.GatewayServer)
		client, okC = a.obj.(*netv1beta1.GatewayClient)
		serverSide, clientSide = b, a
	}
	if !okS || !okC {
		return []Finding{b.finding("", fmt.Sprintf("%s and %s cannot peer: one side needs a GatewayServer and the other a GatewayClient", a.ref(), b.ref()))}
	}
	var findings []Finding
	if want, path, known := serverPort(server); known {
		if got, field := clientPort(client); got != 0 && got != want {
			findings = append(findings, clientSide.finding(field, fmt.Sprintf(
				"%d does not match %s %d of %s in %s", got, path, want, serverSide.ref(), serverSide.file)))
		}
	}
	if sm, cm := netv1beta1.EffectiveMTU(server.Spec.MTU), netv1beta1.EffectiveMTU(client.Spec.MTU); sm != cm {
		findings = append(findings, clientSide.finding("spec.mtu", fmt.Sprintf(
			"%d differs from %d of %s in %s: both sides of a tunnel must use the same MTU", cm, sm, serverSide.ref(), serverSide.file)))
	}
	if ep := server.Spec.Endpoint; ep.ServiceType == corev1.ServiceTypeLoadBalancer && ep.LoadBalancerIP != nil && *ep.LoadBalancerIP != "" &&
		len(client.Spec.Endpoint.Addresses) > 0 && !slices.Contains(client.Spec.Endpoint.Addresses, *ep.LoadBalancerIP) {
		findings = append(findings, clientSide.finding("spec.endpoint.addresses", fmt.Sprintf(
			"%v does not hold %s, the pinned spec.endpoint.loadBalancerIP of %s in %s: the client would connect elsewhere than the server",
			client.Spec.Endpoint.Addresses, *ep.LoadBalancerIP, serverSide.ref(), serverSide.file)))
	}
	// Each bundle holds the other side's PublicKey: the same key in both
	// means one gateway's key was copied to the other.
	if ka, kb := bundlePublicKey(dirA), bundlePublicKey(dirB); ka != nil && kb != nil && bytes.Equal(ka.key, kb.key) {
		findings = append(findings, kb.finding("spec.publicKey", fmt.Sprintf(
			"the same key as %s in %s: each side's gateway has its own key, so the two bundles hold different ones", ka.ref(), ka.file)))
	}
	return findings
}

// keyObject is a bundle's PublicKey and the key it holds.
type keyObject struct {
	typedObject
	key []byte
}

// bundlePublicKey returns a bundle's PublicKey, if it holds one that
// decodes.
func bundlePublicKey(dir string) *keyObject {
	objs, err := buildBundle(dir)
	if err != nil {
		return nil
	}
	for _, o := range objs {
		if !manifests.IsPeeringKind(o.u) || o.u.GetKind() != manifests.KindPublicKey {
			continue
		}
		obj, _, err := manifests.DecodeStrict(o.u)
		if err != nil {
			return nil
		}
		pk := obj.(*netv1beta1.PublicKey)
		return &keyObject{typedObject: typedObject{bundleObject: o, obj: pk}, key: pk.Spec.PublicKey}
	}
	return nil
}

// bundleGateway builds a bundle and returns its one gateway, if any.
func bundleGateway(dir string) (*typedObject, error) {
	objs, err := buildBundle(dir)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if k := o.u.GetKind(); !manifests.IsPeeringKind(o.u) || (k != manifests.KindGatewayServer && k != manifests.KindGatewayClient) {
			continue
		}
		obj, _, err := manifests.DecodeStrict(o.u)
		if err != nil {
			return nil, err
		}
		t := typedObject{bundleObject: o, obj: obj.(interface{ GetLabels() map[string]string })}
		return &t, nil
	}
	return nil, nil
}

// serverPort is the port a client must use for a server, when the server's
// spec fixes it: the pinned node port of a NodePort service, else the
// service port. An unpinned node port is only known once allocated.
func serverPort(s *netv1beta1.GatewayServer) (int32, string, bool) {
	spec := s.Spec
	spec.Default()
	ep := spec.Endpoint.Resolved()
	if ep.ServiceType == corev1.ServiceTypeNodePort {
		if ep.NodePort == nil || *ep.NodePort == 0 {
			return 0, "", false
		}
		if len(spec.Endpoint.NodePorts) > 0 {
			return *ep.NodePort, "the pinned spec.endpoint.nodePorts[0]", true
		}
		return *ep.NodePort, "the pinned spec.endpoint.nodePort", true
	}
	if len(spec.Endpoint.Ports) > 0 {
		return ep.Port, "spec.endpoint.ports[0]", true
	}
	return ep.Port, "spec.endpoint.port", true
}

// clientPort is the server port a client dials, 0 while unknown, and the
// field that says it: spec.endpoint.ports[0] when the list is written,
// else spec.endpoint.port.
func clientPort(c *netv1beta1.GatewayClient) (int32, string) {
	if len(c.Spec.Endpoint.Ports) > 0 {
		return c.Spec.Endpoint.Ports[0], "spec.endpoint.ports[0]"
	}
	return c.Spec.Endpoint.Port, "spec.endpoint.port"
}
