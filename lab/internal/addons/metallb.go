package addons

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// MetalLBNamespace is where MetalLB's own install configuration puts its
// controller and speakers.
const MetalLBNamespace = "metallb-system"

// MetalLB's programs as hack/components.sh names them: the lab publishes
// their images under these names.
const (
	MetalLBController = "metallb-controller"
	MetalLBSpeaker    = "metallb-speaker"
)

// MetalLBPoolName names the IPAddressPool and the L2Advertisement of the lab.
const MetalLBPoolName = "lab"

// FindMetalLB locates the MetalLB module at the version the repository pins
// in hack/metallb/go.mod, downloading it through the module proxy when the
// module cache lacks it. The module holds MetalLB's install configuration
// under config/.
func FindMetalLB(ctx context.Context, repo string) (string, error) {
	return moduleDir(ctx, filepath.Join(repo, "hack", "metallb"), "go.universe.tf/metallb")
}

// MetalLB returns the manifests that install MetalLB in L2 mode, as its
// module's config/native defines them (namespace, CRDs, RBAC, the
// controller Deployment with its validating webhook, the speaker
// DaemonSet), with the images taken from the lab registry. Nothing is
// written but a kustomization in a temporary directory.
func MetalLB(module, registry string) ([]byte, error) {
	if module == "" {
		return nil, fmt.Errorf("metallb manifests: no module directory")
	}
	dir, err := os.MkdirTemp("", "lab-metallb-")
	if err != nil {
		return nil, fmt.Errorf("metallb manifests: %w", err)
	}
	defer os.RemoveAll(dir)
	// kustomize takes only relative paths to other kustomizations.
	rel, err := filepath.Rel(dir, filepath.Join(module, "config", "native"))
	if err != nil {
		return nil, fmt.Errorf("metallb manifests: %w", err)
	}
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{rel},
		"images": []map[string]string{
			{"name": "quay.io/metallb/controller", "newName": registry + "/lab/" + MetalLBController, "newTag": "latest"},
			{"name": "quay.io/metallb/speaker", "newName": registry + "/lab/" + MetalLBSpeaker, "newTag": "latest"},
		},
	}
	out, err := build(dir, map[string]any{"kustomization.yaml": k})
	if err != nil {
		return nil, fmt.Errorf("metallb manifests: %w", err)
	}
	return out, nil
}

// MetalLBPool returns the IPAddressPool of the addresses first to last and
// the L2Advertisement that has the speakers answer ARP for them, as a user
// of MetalLB in L2 mode on bare metal declares them.
func MetalLBPool(first, last netip.Addr) ([]byte, error) {
	if !first.Is4() || !last.Is4() || last.Less(first) {
		return nil, fmt.Errorf("metallb pool %s-%s: not a range of IPv4 addresses", first, last)
	}
	return fmt.Appendf(nil, `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  addresses:
  - %[3]s-%[4]s
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  ipAddressPools:
  - %[1]s
`, MetalLBPoolName, MetalLBNamespace, first, last), nil
}
