package addons

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/peerlink/peerlink/internal/kbuild"
)

// FluxNamespace is where the lab installs the Flux controllers, as the Flux
// CLI does.
const FluxNamespace = "flux-system"

// FluxControllers are the directories of the source-controller and
// kustomize-controller modules, at the versions hack/flux pins; each holds
// the controller's own install configuration under config/.
type FluxControllers struct {
	SourceController    string
	KustomizeController string
}

// FindFluxControllers locates the controllers' modules at the versions the
// repository pins in hack/flux/<controller>/go.mod, downloading them through
// the module proxy when the module cache lacks them.
func FindFluxControllers(ctx context.Context, repo string) (FluxControllers, error) {
	dir := func(controller string) (string, error) {
		return moduleDir(ctx, filepath.Join(repo, "hack", "flux", controller), "github.com/fluxcd/"+controller)
	}
	var c FluxControllers
	var err error
	if c.SourceController, err = dir("source-controller"); err != nil {
		return c, err
	}
	c.KustomizeController, err = dir("kustomize-controller")
	return c, err
}

// moduleDir is the directory of module mod at the version the module in
// pin (a directory under hack/) selects, downloaded through the module
// proxy when the module cache lacks it.
func moduleDir(ctx context.Context, pin, mod string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Dir = pin
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", mod, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", mod, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", mod, m.Error)
	}
	return m.Dir, nil
}

// fluxCancelHealthCheck is the kustomize-controller flag that lets a new
// revision interrupt a running health check.
const fluxCancelHealthCheck = "--feature-gates=CancelHealthCheckOnNewRevision=true"

// Flux returns the manifests that install source-controller and
// kustomize-controller: their CRDs, RBAC, Deployments and Services, as the
// modules' own config/ directories define them, in namespace flux-system,
// with their images taken from the lab registry and kustomize-controller
// told to let a new commit interrupt a health check. Nothing is written but a
// kustomization in a temporary directory.
func Flux(c FluxControllers, registry string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "lab-flux-")
	if err != nil {
		return nil, fmt.Errorf("flux manifests: %w", err)
	}
	defer os.RemoveAll(dir)
	var resources []string
	var images []map[string]string
	for _, ctl := range []struct{ name, dir string }{
		{"source-controller", c.SourceController},
		{"kustomize-controller", c.KustomizeController},
	} {
		if ctl.dir == "" {
			return nil, fmt.Errorf("flux manifests: no module directory for %s", ctl.name)
		}
		// The modules' config/default cannot be used as it is: it names
		// its own namespace, and kustomize-controller's fetches
		// source-controller's manifests from the internet.
		// kustomize takes only relative paths to other kustomizations.
		rel, err := filepath.Rel(dir, ctl.dir)
		if err != nil {
			return nil, fmt.Errorf("flux manifests: %w", err)
		}
		for _, part := range []string{"crd", "rbac", "manager"} {
			resources = append(resources, filepath.Join(rel, "config", part))
		}
		images = append(images, map[string]string{
			"name": "fluxcd/" + ctl.name, "newName": registry + "/lab/" + ctl.name, "newTag": "latest",
		})
	}
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": FluxNamespace}}
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"namespace":  FluxNamespace,
		"resources":  append([]string{"namespace.yaml"}, resources...),
		"images":     images,
		// A commit pushed while a Kustomization waits for its health
		// checks is applied at once, not after the wait times out: the
		// setting docs/gitops.md recommends for peer bundles, whose first
		// commit waits for a peer that may take a while.
		"patches": []map[string]any{{
			"target": map[string]string{"kind": "Deployment", "name": "kustomize-controller"},
			"patch": `[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "` +
				fluxCancelHealthCheck + `"}]`,
		}},
	}
	out, err := build(dir, map[string]any{"namespace.yaml": ns, "kustomization.yaml": k})
	if err != nil {
		return nil, fmt.Errorf("flux manifests: %w", err)
	}
	return out, nil
}

// build writes files (name to object) into dir, which holds a
// kustomization, and returns what kustomize builds of it as one YAML
// stream.
func build(dir string, files map[string]any) ([]byte, error) {
	for name, obj := range files {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	objs, err := kbuild.BuildFS(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		out = append(append(out, "---\n"...), data...)
	}
	return out, nil
}
