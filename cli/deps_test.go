package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryCarriesNoController lists what the peerlink binary depends on, as
// the build sees it: the CLI reaches clusters through their API servers
// only, so neither the controller's reconcilers nor an agent may be built
// into it.
func TestBinaryCarriesNoController(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../cmd/peerlink").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ../cmd/peerlink: %v\n%s", err, out)
	}
	const module = "github.com/peerlink/peerlink/"
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"reconciler", "dataplane/gateway", "dataplane/fabric", "dataplane/kernel", "testkit"} {
			if dep == module+banned || strings.HasPrefix(dep, module+banned+"/") {
				t.Errorf("cmd/peerlink depends on %s: the CLI must not carry the controller, an agent or test machinery", dep)
			}
		}
	}
}
