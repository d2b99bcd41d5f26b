package dataplane

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/peerlink/peerlink/dataplane/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/dataplane")

const goldenDir = "../testdata/dataplane"

// readFacts reads the facts.json of the golden case in dir into j.
func readFacts(t *testing.T, dir string, j any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "facts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, j); err != nil {
		t.Fatal(err)
	}
}

// goldenCases are the directories of the golden cases: gateway facts, or
// fabric facts where the name starts with fabric-.
func goldenCases(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(goldenDir, "*", "facts.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden cases in %s: %v", goldenDir, err)
	}
	dirs := make([]string, len(files))
	for i, f := range files {
		dirs[i] = filepath.Dir(f)
	}
	return dirs
}

// planCase plans the golden case in dir. It returns the plan as text, the
// part of it every agent writes, and what its planner says such a plan
// owns.
func planCase(t *testing.T, dir string) (text string, netns, owned plan.NetNS) {
	t.Helper()
	if strings.HasPrefix(filepath.Base(dir), "fabric-") {
		var j fabricFactsFile
		readFacts(t, dir, &j)
		p, err := PlanFabric(j.facts())
		if err != nil {
			t.Fatal(err)
		}
		return p.String(), p.NetNS, FabricOwned()
	}
	var j gatewayFactsFile
	readFacts(t, dir, &j)
	p, err := PlanGateway(j.facts(t))
	if err != nil {
		t.Fatal(err)
	}
	return p.String(), p.NetNS, GatewayOwned()
}

func TestPlanGolden(t *testing.T) {
	for _, dir := range goldenCases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got, _, _ := planCase(t, dir)
			golden := filepath.Join(dir, "plan.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("plan differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", golden, got, want)
			}
		})
	}
}

// TestPlansOwnWhatTheyWrite checks, on every golden case, that what an
// agent removes when it stops (GatewayOwned, FabricOwned) names every
// kernel object the plan writes.
func TestPlansOwnWhatTheyWrite(t *testing.T) {
	for _, dir := range goldenCases(t) {
		_, n, o := planCase(t, dir)
		if n.Overlay.Name != o.Overlay.Name || n.NAT.Table != o.NAT.Table || n.NAT6.Table != "" && n.NAT6.Table != o.NAT6.Table ||
			n.Routes.LocalExceptIIF != o.Routes.LocalExceptIIF ||
			!slices.Equal(n.Routes.Tables, o.Routes.Tables) || !slices.Equal(n.Routes.RulePriorities, o.Routes.RulePriorities) {
			t.Errorf("%s: the plan writes %+v, its planner owns %+v", dir, n, o)
		}
		for _, r := range n.Routes.Routes {
			if !slices.Contains(o.Routes.Tables, r.Table) {
				t.Errorf("%s: route %s is in a table not owned", dir, r)
			}
		}
		for _, r := range n.Routes.Rules {
			if !slices.Contains(o.Routes.RulePriorities, r.Priority) {
				t.Errorf("%s: rule %s is at a priority not owned", dir, r)
			}
		}
	}
}
