package helmchart

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/hasher"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"
)

// The chart's paths Generate writes: values.yaml, and every file in the
// two directories. Chart.yaml is not generated.
const (
	ValuesFile   = "values.yaml"
	TemplatesDir = "templates"
	CRDsDir      = "crds"
)

// Header starts every generated file.
const Header = "# Generated from the bundles (bundles/install, bundles/monitoring) by package\n" +
	"# bundles/helmchart: edit the bundle, then run `make generate`.\n"

// namePrefix is left out of value keys: Deployment peerlink-controller has
// the values under controller.
const namePrefix = "peerlink-"

// ChecksumAnnotation is the annotation of the pod template of each workload
// that reads a generated ConfigMap: a hash of the ConfigMap as the chart
// renders it, so that a change of its values rolls the pods out.
const ChecksumAnnotation = "checksum/config"

// tokenMark marks the placeholders that stand for template expressions
// while an object is marshalled; no object of the bundle may hold it.
const tokenMark = "zz-helm-value-"

// Files are the generated files of the chart, by path in the chart.
type Files map[string][]byte

// Optional is a part of the chart off by default: the objects of another
// bundle (as kbuild.Build returns them), rendered when the value
// <Key>.enabled is true.
type Optional struct {
	// Key is where the part's values are, and the prefix of its
	// templates' file names.
	Key string
	// Comment says, in values.yaml, what the part is.
	Comment string
	Objects []*unstructured.Unstructured
}

// Generate returns the generated files of the chart for objs, the objects
// of the install bundle as kbuild.Build returns them, and its optional
// parts.
func Generate(objs []*unstructured.Unstructured, optional ...Optional) (Files, error) {
	g := &generator{images: map[string]*image{}, optional: optional}
	if err := g.scan(objs); err != nil {
		return nil, err
	}
	files := Files{}
	for _, o := range optional {
		if g.takenKey(o.Key) {
			return nil, fmt.Errorf("optional part %s: its values would be under a key the bundle's objects have", o.Key)
		}
		for _, u := range o.Objects {
			if u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition" {
				return nil, fmt.Errorf("optional part %s: %s %s: a part holds no Namespace or CRD", o.Key, u.GetKind(), u.GetName())
			}
			b, err := g.template(u)
			if err != nil {
				return nil, fmt.Errorf("optional part %s: %s %s: %w", o.Key, u.GetKind(), u.GetName(), err)
			}
			body := append([]byte("{{- if .Values."+o.Key+".enabled }}\n"), b...)
			body = append(body, "{{- end }}\n"...)
			if err := files.add(path.Join(TemplatesDir, o.Key+"-"+g.fileName(u)), body); err != nil {
				return nil, err
			}
		}
	}
	for _, u := range objs {
		switch {
		case u.GetKind() == "Namespace" && u.GetAPIVersion() == "v1":
			continue
		case u.GetKind() == "CustomResourceDefinition":
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				return nil, fmt.Errorf("CustomResourceDefinition %s: %w", u.GetName(), err)
			}
			if err := files.add(path.Join(CRDsDir, u.GetName()+".yaml"), b); err != nil {
				return nil, err
			}
		default:
			b, err := g.template(u)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
			}
			if err := files.add(path.Join(TemplatesDir, g.fileName(u)), b); err != nil {
				return nil, err
			}
		}
	}
	values, err := g.valuesFile()
	if err != nil {
		return nil, err
	}
	files[ValuesFile] = values
	files[path.Join(TemplatesDir, "_helpers.tpl")] = g.helpers()
	return files, nil
}

func (f Files) add(name string, body []byte) error {
	if _, ok := f[name]; ok {
		return fmt.Errorf("two objects would be written to %s", name)
	}
	f[name] = append([]byte(Header), body...)
	return nil
}

// generator holds what scan found in the bundle, and the optional parts.
type generator struct {
	optional  []Optional
	namespace string
	configs   []*config
	workloads []*workload
	images    map[string]*image // by reference
	imageRefs []string          // in the order they were found
}

// config is a ConfigMap a configMapGenerator made. The chart names it
// name, without the hash kustomize appends (hashedName).
type config struct {
	name, hashedName, key string
	data                  map[string]string
}

// fileName is the name of the ConfigMap's template.
func (c *config) fileName() string { return "configmap-" + c.name + ".yaml" }

// workload is a Deployment, DaemonSet or StatefulSet.
type workload struct {
	kind, name, key, container string
	replicas                   any
	resources                  any
}

// image is one image the workloads run.
type image struct {
	key                     string
	repository, tag, digest string
}

// scan finds the namespace, the generated ConfigMaps, the workloads and
// their images.
func (g *generator) scan(objs []*unstructured.Unstructured) error {
	keys := map[string]string{"images": "the images"}
	claim := func(key, what string) error {
		if other, ok := keys[key]; ok {
			return fmt.Errorf("%s and %s would both have their values under %s", other, what, key)
		}
		keys[key] = what
		return nil
	}
	for _, u := range objs {
		raw, err := yaml.Marshal(u.Object)
		if err != nil {
			return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		if bytes.Contains(raw, []byte(tokenMark)) {
			return fmt.Errorf("%s %s holds %q, which the generator keeps for its placeholders", u.GetKind(), u.GetName(), tokenMark)
		}
		switch u.GetKind() {
		case "Namespace":
			if g.namespace != "" {
				return fmt.Errorf("the bundle has two Namespaces, %s and %s: the chart installs into one, the release's", g.namespace, u.GetName())
			}
			g.namespace = u.GetName()
		case "ConfigMap":
			c, err := generatedConfig(u)
			if err != nil || c == nil {
				return err
			}
			if err := claim(c.key, "ConfigMap "+c.name); err != nil {
				return err
			}
			g.configs = append(g.configs, c)
		case "Deployment", "DaemonSet", "StatefulSet":
			w, err := g.addWorkload(u)
			if err != nil {
				return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
			}
			if err := claim(w.key, u.GetKind()+" "+u.GetName()); err != nil {
				return err
			}
			g.workloads = append(g.workloads, w)
		}
	}
	if g.namespace == "" {
		return fmt.Errorf("the bundle has no Namespace: the chart needs to know which namespace fields to give the release's")
	}
	return nil
}

// takenKey reports whether the values of the bundle's objects use key.
func (g *generator) takenKey(key string) bool {
	if key == "images" {
		return true
	}
	for _, c := range g.configs {
		if c.key == key {
			return true
		}
	}
	for _, w := range g.workloads {
		if w.key == key {
			return true
		}
	}
	return false
}

// generatedConfig returns the ConfigMap u as a configMapGenerator made it,
// or nil when it was not made so: its name is not its content's hash
// appended to another name, or it has no data.
func generatedConfig(u *unstructured.Unstructured) (*config, error) {
	base, suffix, ok := cutLast(u.GetName(), "-")
	if !ok {
		return nil, nil
	}
	data, found, err := unstructured.NestedStringMap(u.Object, "data")
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", u.GetName(), err)
	}
	if !found {
		return nil, nil
	}
	node, err := kyaml.FromMap(u.Object)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", u.GetName(), err)
	}
	if err := node.SetName(base); err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", u.GetName(), err)
	}
	hash, err := (&hasher.Hasher{}).Hash(node)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", u.GetName(), err)
	}
	if hash != suffix {
		return nil, nil
	}
	return &config{name: base, hashedName: u.GetName(), key: valueKey(base), data: data}, nil
}

// holdsString reports whether s is one of the strings of v, a decoded JSON
// value.
func holdsString(v any, s string) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, child := range v {
			if holdsString(child, s) {
				return true
			}
		}
	case []any:
		for _, child := range v {
			if holdsString(child, s) {
				return true
			}
		}
	case string:
		return v == s
	}
	return false
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// addWorkload records a workload and the images of its containers.
func (g *generator) addWorkload(u *unstructured.Unstructured) (*workload, error) {
	containers, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return nil, err
	}
	if len(containers) != 1 {
		return nil, fmt.Errorf("%d containers: the chart gives values to workloads of one container", len(containers))
	}
	c, ok := containers[0].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("spec.template.spec.containers[0] is not an object")
	}
	w := &workload{kind: u.GetKind(), name: u.GetName(), key: valueKey(u.GetName()), resources: c["resources"]}
	w.container, _ = c["name"].(string)
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		w.replicas = spec["replicas"]
	}
	ref, ok := c["image"].(string)
	if !ok || ref == "" {
		return nil, fmt.Errorf("container %s has no image", w.container)
	}
	if _, seen := g.images[ref]; !seen {
		im := parseImage(ref)
		for _, other := range g.images {
			if other.key == im.key {
				return nil, fmt.Errorf("images %s and %s would both have their values under images.%s", other.reference(), ref, im.key)
			}
		}
		g.images[ref] = im
		g.imageRefs = append(g.imageRefs, ref)
	}
	return w, nil
}

// parseImage splits an image reference into repository, tag and digest,
// and names its values after the repository's last element.
func parseImage(ref string) *image {
	im := &image{repository: ref}
	if r, digest, ok := strings.Cut(im.repository, "@"); ok {
		im.repository, im.digest = r, digest
	}
	// A colon after the last slash starts the tag; one before it is a
	// registry's port.
	if i := strings.LastIndex(im.repository, ":"); i > strings.LastIndex(im.repository, "/") {
		im.repository, im.tag = im.repository[:i], im.repository[i+1:]
	}
	im.key = valueKey(path.Base(im.repository))
	return im
}

func (im *image) reference() string {
	ref := im.repository
	if im.tag != "" {
		ref += ":" + im.tag
	}
	if im.digest != "" {
		ref += "@" + im.digest
	}
	return ref
}

// valueKey is the key of a name's values: without the project's prefix,
// in lower camel case (peerlink-cluster-info is clusterInfo).
func valueKey(name string) string {
	words := strings.Split(strings.TrimPrefix(name, namePrefix), "-")
	for i := 1; i < len(words); i++ {
		if words[i] != "" {
			words[i] = strings.ToUpper(words[i][:1]) + words[i][1:]
		}
	}
	return strings.Join(words, "")
}

// fileName is the name of an object's template.
func (g *generator) fileName(u *unstructured.Unstructured) string {
	if c := g.config(u); c != nil {
		return c.fileName()
	}
	return strings.ToLower(u.GetKind()) + "-" + u.GetName() + ".yaml"
}

// config returns the generated ConfigMap u is, or nil.
func (g *generator) config(u *unstructured.Unstructured) *config {
	if u.GetKind() != "ConfigMap" {
		return nil
	}
	for _, c := range g.configs {
		if c.hashedName == u.GetName() {
			return c
		}
	}
	return nil
}

// substitution is a template expression that replaces a placeholder. A
// block expression replaces a whole value of several lines, and holds a %d
// for the indentation of its lines.
type substitution struct {
	expr  string
	block bool
}

// placeholders hands out the placeholders of one object.
type placeholders []substitution

func (p *placeholders) scalar(expr string) string {
	*p = append(*p, substitution{expr: expr})
	return p.token(len(*p) - 1)
}

func (p *placeholders) block(expr string) string {
	*p = append(*p, substitution{expr: expr, block: true})
	return p.token(len(*p) - 1)
}

func (p *placeholders) token(i int) string {
	return fmt.Sprintf("%s%d", tokenMark, i)
}

// template returns the chart template of one object.
func (g *generator) template(u *unstructured.Unstructured) ([]byte, error) {
	obj := u.DeepCopy().Object
	var p placeholders
	if c := g.config(u); c != nil {
		obj["data"] = p.block(`{{- include "peerlink.` + c.key + `.data" . | nindent %d }}`)
	}
	for _, w := range g.workloads {
		if u.GetKind() != w.kind || u.GetName() != w.name {
			continue
		}
		spec := obj["spec"].(map[string]any)
		if w.replicas != nil {
			spec["replicas"] = p.scalar("{{ .Values." + w.key + ".replicas }}")
		}
		podTemplate := spec["template"].(map[string]any)
		if w.resources != nil {
			c := podTemplate["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			c["resources"] = p.block("{{- toYaml .Values." + w.key + ".resources | nindent %d }}")
		}
		if reads := g.readBy(podTemplate); len(reads) > 0 {
			if err := unstructured.SetNestedField(podTemplate, p.scalar(checksum(reads)), "metadata", "annotations", ChecksumAnnotation); err != nil {
				return nil, err
			}
		}
	}
	g.replaceStrings(obj, "", &p)

	b, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	text := escapeBraces(string(b))
	for i, s := range p {
		token := p.token(i)
		if !s.block {
			text = strings.Replace(text, token, s.expr, 1)
			continue
		}
		// "key: token" becomes "key:" and the value's lines below, indented
		// one step further than the key.
		at := strings.Index(text, " "+token+"\n")
		if at < 0 {
			return nil, fmt.Errorf("placeholder of %q is not a map value", s.expr)
		}
		lineStart := strings.LastIndex(text[:at], "\n") + 1
		line := text[lineStart:at]
		indent := len(line) - len(strings.TrimLeft(line, " -")) + 2
		text = text[:at] + " " + fmt.Sprintf(s.expr, indent) + text[at+1+len(token):]
	}
	return []byte(text), nil
}

// readBy returns the generated ConfigMaps a pod template names, by the
// names the bundle gives them.
func (g *generator) readBy(podTemplate map[string]any) []*config {
	var reads []*config
	for _, c := range g.configs {
		if holdsString(podTemplate, c.hashedName) {
			reads = append(reads, c)
		}
	}
	return reads
}

// checksum is the expression of the ChecksumAnnotation of a workload that
// reads configs: the SHA-256 of their templates as Helm renders them.
func checksum(configs []*config) string {
	var includes []string
	for _, c := range configs {
		includes = append(includes, `include (print $.Template.BasePath "/`+c.fileName()+`") .`)
	}
	if len(includes) == 1 {
		return "{{ " + includes[0] + " | sha256sum | quote }}"
	}
	return "{{ print (" + strings.Join(includes, ") (") + ") | sha256sum | quote }}"
}

// replaceStrings puts placeholders in place of the strings the chart
// computes, namespace fields naming the bundle's namespace and images, and
// gives generated ConfigMaps their names without the hash.
func (g *generator) replaceStrings(v any, key string, p *placeholders) any {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			v[k] = g.replaceStrings(child, k, p)
		}
	case []any:
		for i, child := range v {
			v[i] = g.replaceStrings(child, key, p)
		}
	case string:
		if key == "namespace" && v == g.namespace {
			return p.scalar("{{ .Release.Namespace | quote }}")
		}
		if key == "image" {
			if im, ok := g.images[v]; ok {
				return p.scalar(`{{ include "peerlink.image" .Values.images.` + im.key + ` | quote }}`)
			}
		}
		for _, c := range g.configs {
			if v == c.hashedName {
				return c.name
			}
		}
	}
	return v
}

// escapeBraces makes the text's template delimiters, as in the gateway
// templates' Go templates, render as themselves.
func escapeBraces(s string) string {
	const open, close = "\x00", "\x01"
	s = strings.ReplaceAll(s, "{{", open)
	s = strings.ReplaceAll(s, "}}", close)
	s = strings.ReplaceAll(s, open, `{{ "{{" }}`)
	return strings.ReplaceAll(s, close, `{{ "}}" }}`)
}

// valuesFile returns values.yaml: the values that render the bundle as it
// is, each part with a comment that says where it goes.
func (g *generator) valuesFile() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(Header)
	b.WriteString(`#
# With these values the chart renders what kustomize builds of bundles/install,
# but the Namespace: the chart installs into the release's namespace
# (helm install -n peerlink --create-namespace). docs/install.md says what each
# value means.
`)
	section := func(comment, key string, v any) error {
		out, err := yaml.Marshal(map[string]any{key: v})
		if err != nil {
			return fmt.Errorf("values %s: %w", key, err)
		}
		fmt.Fprintf(&b, "\n# %s\n%s", comment, out)
		return nil
	}
	for _, c := range g.configs {
		comment := "The data of ConfigMap " + c.name + ", every value a string; the pods that read\n" +
			"# it carry a hash of it (annotation " + ChecksumAnnotation + "), so a change rolls them out."
		if err := section(comment, c.key, c.data); err != nil {
			return nil, err
		}
	}
	images := map[string]any{}
	for _, ref := range g.imageRefs {
		im := g.images[ref]
		images[im.key] = map[string]string{"repository": im.repository, "tag": im.tag, "digest": im.digest}
	}
	if err := section("The images the workloads run, as repository, tag and digest (tag and\n"+
		"# digest may be empty), wherever the bundle names them.", "images", images); err != nil {
		return nil, err
	}
	for _, w := range g.workloads {
		v := map[string]any{}
		var what []string
		if w.replicas != nil {
			v["replicas"] = w.replicas
			what = append(what, "its replicas")
		}
		if w.resources != nil {
			v["resources"] = w.resources
			what = append(what, "the resources of its container "+w.container)
		}
		if len(v) == 0 {
			continue
		}
		if err := section(w.kind+" "+w.name+": "+strings.Join(what, " and ")+".", w.key, v); err != nil {
			return nil, err
		}
	}
	for _, o := range g.optional {
		if err := section(o.Comment, o.Key, map[string]any{"enabled": false}); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// helpers returns _helpers.tpl: the image reference, and the data of each
// generated ConfigMap.
func (g *generator) helpers() []byte {
	var b strings.Builder
	b.WriteString("{{/*\n" + strings.ReplaceAll(Header, "# ", "") + "*/}}\n")
	b.WriteString(`
{{/* An image reference from its values: repository, tag and digest. */}}
{{- define "peerlink.image" -}}
{{ .repository }}{{ with .tag }}:{{ . }}{{ end }}{{ with .digest }}@{{ . }}{{ end }}
{{- end }}
`)
	for _, c := range g.configs {
		fmt.Fprintf(&b, `
{{/* The data of ConfigMap %[1]s: the values under %[2]s, as strings. */}}
{{- define "peerlink.%[2]s.data" -}}
{{- $data := dict -}}
{{- range $key, $value := .Values.%[2]s }}{{ $_ := set $data $key (toString $value) }}{{ end -}}
{{ toYaml $data }}
{{- end }}
`, c.name, c.key)
	}
	return []byte(b.String())
}
