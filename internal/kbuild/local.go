package kbuild

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/konfig"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// maxKustomizations bounds the kustomizations CheckLocal reads: a bundle
// has a handful.
const maxKustomizations = 256

// BuildLocalFS is BuildFS for a directory that may come from outside this
// cluster's trust, such as a peer bundle: CheckLocal first, so that the
// build reads local files only and makes no network request.
func BuildLocalFS(fs filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
	if err := CheckLocal(fs, dir); err != nil {
		return nil, err
	}
	return BuildFS(fs, dir)
}

// CheckLocal reads the kustomization in dir and every kustomization it
// reaches through local directories (resources, bases, components,
// generators, transformers, validators), and refuses any entry that would
// make kustomize fetch something: a URL (http, https, ssh, file or any
// other scheme), a git repository (git::, user@host:, github.com/...),
// or a Helm chart repository. It runs before kustomize, so nothing is
// fetched; the error names the kustomization file, the field and the
// entry (a *RemoteError). Whether local entries exist is left to
// kustomize.
func CheckLocal(fs filesys.FileSystem, dir string) error {
	c := &localCheck{fs: fs, seen: map[string]bool{}}
	return c.dir(filepath.Clean(dir))
}

type localCheck struct {
	fs   filesys.FileSystem
	seen map[string]bool
}

// dir checks the kustomization in dir, if it has one.
func (c *localCheck) dir(dir string) error {
	if c.seen[dir] {
		return nil
	}
	c.seen[dir] = true
	if len(c.seen) > maxKustomizations {
		return fmt.Errorf("%s: more than %d kustomizations reached", dir, maxKustomizations)
	}
	var file string
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if p := filepath.Join(dir, name); c.fs.Exists(p) && !c.fs.IsDir(p) {
			file = p
			break
		}
	}
	if file == "" {
		return nil // kustomize reports a directory that is not a kustomization
	}
	data, err := c.fs.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	var k kusttypes.Kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}

	// Directories of kustomizations, which kustomize may also clone.
	// The deprecated fields are read on purpose: kustomize still follows
	// them, so a remote entry there must be refused too.
	bases := []struct {
		field   string
		entries []string
	}{
		//lint:ignore SA1019 kustomize still fetches what the deprecated field names
		{"resources", k.Resources}, {"bases", k.Bases}, {"components", k.Components},
		{"generators", k.Generators}, {"transformers", k.Transformers}, {"validators", k.Validators},
	}
	for _, b := range bases {
		for i, e := range b.entries {
			if inline(e) {
				continue
			}
			if err := checkEntry(file, fmt.Sprintf("%s[%d]", b.field, i), e); err != nil {
				return err
			}
			if p := filepath.Join(dir, e); c.fs.IsDir(p) {
				if err := c.dir(filepath.Clean(p)); err != nil {
					return err
				}
			}
		}
	}

	// Files, which kustomize fetches over HTTP when they are URLs.
	var files []struct{ field, entry string }
	add := func(field, entry string) {
		if entry != "" {
			files = append(files, struct{ field, entry string }{field, entry})
		}
	}
	for i, e := range k.Crds {
		add(fmt.Sprintf("crds[%d]", i), e)
	}
	for i, e := range k.Configurations {
		add(fmt.Sprintf("configurations[%d]", i), e)
	}
	add("openapi.path", k.OpenAPI["path"])
	//lint:ignore SA1019 kustomize still fetches what the deprecated field names
	for i, p := range k.PatchesStrategicMerge {
		if !inline(string(p)) {
			add(fmt.Sprintf("patchesStrategicMerge[%d]", i), string(p))
		}
	}
	for i, p := range k.Patches {
		add(fmt.Sprintf("patches[%d].path", i), p.Path)
	}
	//lint:ignore SA1019 kustomize still fetches what the deprecated field names
	for i, p := range k.PatchesJson6902 {
		add(fmt.Sprintf("patchesJson6902[%d].path", i), p.Path)
	}
	for i, r := range k.Replacements {
		add(fmt.Sprintf("replacements[%d].path", i), r.Path)
	}
	sources := func(field string, s kusttypes.KvPairSources) {
		for j, f := range s.FileSources {
			// key=path or path
			if _, path, ok := strings.Cut(f, "="); ok {
				f = path
			}
			add(fmt.Sprintf("%s.files[%d]", field, j), f)
		}
		for j, e := range s.EnvSources {
			add(fmt.Sprintf("%s.envs[%d]", field, j), e)
		}
		add(field+".env", s.EnvSource)
	}
	for i, g := range k.ConfigMapGenerator {
		sources(fmt.Sprintf("configMapGenerator[%d]", i), g.KvPairSources)
	}
	for i, g := range k.SecretGenerator {
		sources(fmt.Sprintf("secretGenerator[%d]", i), g.KvPairSources)
	}
	for i, h := range k.HelmCharts {
		field := fmt.Sprintf("helmCharts[%d]", i)
		if h.Repo != "" {
			return &RemoteError{File: file, Field: field + ".repo", Entry: h.Repo, What: "a chart repository"}
		}
		add(field+".valuesFile", h.ValuesFile)
		for j, v := range h.AdditionalValuesFiles {
			add(fmt.Sprintf("%s.additionalValuesFiles[%d]", field, j), v)
		}
	}
	for i, h := range k.HelmChartInflationGenerator {
		field := fmt.Sprintf("helmChartInflationGenerator[%d]", i)
		if h.ChartRepoURL != "" {
			return &RemoteError{File: file, Field: field + ".chartRepoUrl", Entry: h.ChartRepoURL, What: "a chart repository"}
		}
		add(field+".values", h.Values)
	}
	for _, f := range files {
		if err := checkEntry(file, f.field, f.entry); err != nil {
			return err
		}
	}
	return nil
}

// inline reports whether an entry of a list that takes paths or manifests
// is a manifest written in place.
func inline(entry string) bool {
	return strings.Contains(entry, "\n")
}

// scpUser is the user@ that starts a git URL in scp form (git@host:repo),
// which kustomize clones.
var scpUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// RemoteError is the error of CheckLocal: an entry of a kustomization
// names something kustomize would fetch.
type RemoteError struct {
	// File is the kustomization file, Field the path of the entry in it
	// (resources[2]), Entry the entry as written.
	File, Field, Entry string
	// What says what the entry names: a URL, a git repository, a chart
	// repository.
	What string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("%s: %s: %q is %s: remote entries are refused, the build reads local files only and fetches nothing", e.File, e.Field, e.Entry, e.What)
}

// checkEntry refuses an entry that names something remote.
func checkEntry(file, field, entry string) error {
	if what := remote(entry); what != "" {
		return &RemoteError{File: file, Field: field, Entry: entry, What: what}
	}
	return nil
}

// remote says what an entry names when it is not a local path: a URL or
// a git repository, as kustomize reads them (it clones a git URL before it
// looks for a local directory of that name).
func remote(entry string) string {
	e := strings.TrimSpace(entry)
	lower := strings.ToLower(e)
	switch {
	case strings.HasPrefix(lower, "git::"), scpUser.MatchString(e),
		strings.HasPrefix(lower, "github.com/"), strings.HasPrefix(lower, "github.com:"):
		return "a git repository"
	case strings.Contains(e, "://"):
		return "a URL"
	}
	if u, err := url.Parse(e); err == nil && u.Scheme != "" {
		return "a URL"
	}
	return ""
}
