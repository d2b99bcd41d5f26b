package dataplane

import (
	"os/exec"
	"strings"
	"testing"
)

// kernelModules are the modules that reach the kernel or a cluster: a
// planner that imports one of them, even through another package, is no
// longer pure.
var kernelModules = []string{
	"github.com/vishvananda/netlink",
	"github.com/vishvananda/netns",
	"github.com/google/nftables",
	"github.com/mdlayher/netlink",
	"golang.zx2c4.com/wireguard",
	"k8s.io/client-go",
	"sigs.k8s.io/controller-runtime",
}

// TestPlannersArePure lists what the planner and the plan types depend on,
// as the build sees it, and fails on any package of kernelModules; and it
// checks that the appliers, which consume plans, never import the planner.
func TestPlannersArePure(t *testing.T) {
	deps := func(pkgs ...string) []string {
		t.Helper()
		out, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %v: %v\n%s", pkgs, err, out)
		}
		return strings.Fields(string(out))
	}
	for _, dep := range deps(".", "./plan") {
		for _, m := range kernelModules {
			if dep == m || strings.HasPrefix(dep, m+"/") {
				t.Errorf("a planner depends on %s (`go list -deps ./dataplane ./dataplane/plan`): planning must not reach the kernel or a cluster", dep)
			}
		}
	}
	const planner = "github.com/peerlink/peerlink/dataplane"
	for _, dep := range deps("./nat", "./route", "./overlay", "./wireguard") {
		if dep == planner {
			t.Errorf("an applier depends on the planner %s: appliers take plan types only", planner)
		}
	}
}
