package peerbundle

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/templates"
)

const (
	// PlaceholderUID stands for the UID of a gateway read from a file that
	// has none: it was never created, so the API server has not given it one.
	PlaceholderUID = "00000000-0000-0000-0000-000000000000"
	// defaultRenderNamespace is where a gateway without a namespace would
	// go, as with kubectl apply on a default kubeconfig context.
	defaultRenderNamespace = "default"
	// embeddedSource names the default templates in messages.
	embeddedSource = "(default template)"
)

// RenderOverrides replace the template variables render would otherwise take
// from each gateway; empty fields do not override.
type RenderOverrides struct {
	UID, SecretName, ClusterID string
}

// renderSource is an object to render from, with the file it was read from.
type renderSource struct {
	file string
	obj  *unstructured.Unstructured
}

func (s renderSource) String() string {
	return fmt.Sprintf("%s: %s %s", s.file, s.obj.GetKind(), klog.KRef(s.obj.GetNamespace(), s.obj.GetName()))
}

// readRenderSources parses the documents of each file; "-" is stdin, read
// once.
func readRenderSources(files []string, stdin io.Reader) ([]renderSource, error) {
	var out []renderSource
	readStdin := false
	for _, file := range files {
		var data []byte
		var err error
		if file == "-" {
			if readStdin {
				return nil, errors.New("-f -: standard input can be given once")
			}
			readStdin = true
			file = "<stdin>"
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(file)
		}
		if err != nil {
			return nil, err
		}
		objs, err := manifests.ParseManifests(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		for _, obj := range objs {
			out = append(out, renderSource{file: file, obj: obj})
		}
	}
	return out, nil
}

// renderGateways renders every GatewayServer and GatewayClient among
// sources, in order, with its template from sources or else the embedded
// defaults, as the controller would. Errors name the file, the object and
// the field.
func renderGateways(sources []renderSource, ov RenderOverrides) ([]*unstructured.Unstructured, error) {
	defaults, err := templates.Defaults()
	if err != nil {
		return nil, err
	}
	candidates := make([]renderSource, 0, len(sources)+len(defaults))
	candidates = append(candidates, sources...)
	for _, d := range defaults {
		candidates = append(candidates, renderSource{file: embeddedSource, obj: d})
	}

	var out []*unstructured.Unstructured
	for _, src := range sources {
		if src.obj.GetAPIVersion() != netv1beta1.GroupVersion.String() {
			continue
		}
		if kind := src.obj.GetKind(); kind != "GatewayServer" && kind != "GatewayClient" {
			continue
		}
		obj, err := renderGateway(src, candidates, ov)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	if len(out) == 0 {
		return nil, errors.New("no GatewayServer or GatewayClient (networking.liqo.io/v1beta1) in the input")
	}
	return out, nil
}

// renderGateway renders the GatewayServer or GatewayClient of src.
func renderGateway(src renderSource, candidates []renderSource, ov RenderOverrides) (*unstructured.Unstructured, error) {
	obj, err := decodeGateway(src, ov)
	if err != nil {
		return nil, err
	}
	var (
		meta      *metav1.ObjectMeta
		server    bool
		ref       corev1.ObjectReference
		refPath   string
		secretRef corev1.LocalObjectReference
		render    func(tmpl *unstructured.Unstructured, uid, clusterID, secretName string) (*unstructured.Unstructured, error)
	)
	switch gw := obj.(type) {
	case *netv1beta1.GatewayServer:
		gw.Spec.Default()
		meta, server, refPath, secretRef = &gw.ObjectMeta, true, "spec.serverTemplateRef", gw.Spec.SecretRef
		ref = templates.ServerTemplateRef(&gw.Spec, templates.InstallNamespace)
		render = func(tmpl *unstructured.Unstructured, uid, clusterID, secretName string) (*unstructured.Unstructured, error) {
			return templates.RenderServer(tmpl, gw, templates.DataForServer(gw, uid, clusterID, secretName))
		}
	case *netv1beta1.GatewayClient:
		gw.Spec.Default()
		meta, refPath, secretRef = &gw.ObjectMeta, "spec.clientTemplateRef", gw.Spec.SecretRef
		ref = templates.ClientTemplateRef(&gw.Spec, templates.InstallNamespace)
		render = func(tmpl *unstructured.Unstructured, uid, clusterID, secretName string) (*unstructured.Unstructured, error) {
			return templates.Render(tmpl, templates.DataForClient(gw, uid, clusterID, secretName))
		}
	default:
		return nil, fmt.Errorf("%s: decoded into %T", src, obj)
	}
	if meta.Namespace == "" {
		meta.Namespace = defaultRenderNamespace
	}
	if ref.Namespace != templates.InstallNamespace && ref.Namespace != meta.Namespace && templates.IsDefaultTemplate(ref, server) &&
		!slices.ContainsFunc(candidates, func(c renderSource) bool { return c.obj.GetNamespace() == ref.Namespace }) {
		// The input holds nothing in that namespace (Liqo's liqo): the
		// controller renders the installed default where it does not exist.
		ref.Namespace = templates.InstallNamespace
	}
	tmpl, err := lookupTemplate(src, ref, refPath, candidates)
	if err != nil {
		return nil, err
	}
	uid, clusterID, secretName := ov.variables(string(meta.UID), meta.Labels, meta.Name, secretRef)
	rendered, err := render(tmpl.obj, uid, clusterID, secretName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (rendering %s)", tmpl.file, err, src)
	}
	if err := templates.CheckKind(rendered.GroupVersionKind(), templates.RenderedKind(server), nil); err != nil {
		return nil, fmt.Errorf("%s: %s: %s: %w", src, refPath, tmpl.file, err)
	}
	return rendered, nil
}

// decodeGateway decodes src strictly into its Go type and validates it as
// the API would. With --cluster-id, a missing remote-cluster-id label is no
// error: the flag stands for it.
func decodeGateway(src renderSource, ov RenderOverrides) (runtime.Object, error) {
	obj, unknown, err := manifests.DecodeStrict(src.obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%s: %w", src, unknown[0])
	}
	var errs []string
	labelPath := manifests.RemoteClusterIDPath().String()
	for _, e := range manifests.Validate(obj) {
		if ov.ClusterID != "" && e.Field == labelPath && e.Type == field.ErrorTypeRequired {
			continue
		}
		errs = append(errs, e.Error())
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %s", src, strings.Join(errs, "; "))
	}
	return obj, nil
}

// variables returns the template variables of a gateway (UID, remote
// cluster ID, key Secret name), overridden by the flags that are set.
func (ov RenderOverrides) variables(uid string, labels map[string]string, name string, secretRef corev1.LocalObjectReference) (string, string, string) {
	return cmp.Or(ov.UID, uid, PlaceholderUID),
		cmp.Or(ov.ClusterID, labels[netv1beta1.RemoteClusterIDLabel]),
		cmp.Or(ov.SecretName, templates.KeySecretName(name, secretRef))
}

// lookupTemplate returns the template ref names among candidates: the
// objects of the input first, then the embedded defaults. A candidate
// without a namespace matches any.
func lookupTemplate(gw renderSource, ref corev1.ObjectReference, field string, candidates []renderSource) (renderSource, error) {
	var found []renderSource
	for _, c := range candidates {
		ns := c.obj.GetNamespace()
		if c.obj.GetAPIVersion() == ref.APIVersion && c.obj.GetKind() == ref.Kind && c.obj.GetName() == ref.Name &&
			(ns == "" || ns == ref.Namespace) {
			found = append(found, c)
		}
	}
	switch {
	case len(found) == 0:
		return renderSource{}, fmt.Errorf("%s: %s: %s %s not found in the input, and not a default template",
			gw, field, ref.Kind, klog.KRef(ref.Namespace, ref.Name))
	case len(found) > 1 && found[1].file != embeddedSource:
		return renderSource{}, fmt.Errorf("%s: %s: %s %s is given twice: in %s and in %s",
			gw, field, ref.Kind, klog.KRef(ref.Namespace, ref.Name), found[0].file, found[1].file)
	}
	return found[0], nil
}

// RenderFiles renders every GatewayServer and GatewayClient in files ("-"
// is stdin, read once) with its template from the files, or else the
// embedded default, as the controller would, and returns the manifests of
// the rendered objects in order. Nothing is returned unless every gateway
// renders.
func RenderFiles(files []string, stdin io.Reader, ov RenderOverrides) ([]map[string]any, error) {
	sources, err := readRenderSources(files, stdin)
	if err != nil {
		return nil, err
	}
	rendered, err := renderGateways(sources, ov)
	if err != nil {
		return nil, err
	}
	docs := make([]map[string]any, len(rendered))
	for i, obj := range rendered {
		docs[i] = obj.Object
	}
	return docs, nil
}
