package labctl

import (
	"slices"
	"testing"
	"time"
)

// TestSummarizeConformance counts a Ginkgo JSON report's specs by the
// label that says whether they are required, wherever the label sits (on
// the spec or on a container), and ignores setup nodes and unlabelled specs.
func TestSummarizeConformance(t *testing.T) {
	report := `[{"SuiteDescription": "Conformance Suite", "SpecReports": [
	  {"LeafNodeType": "BeforeSuite", "State": "passed", "RunTime": 1000000000},
	  {"ContainerHierarchyTexts": ["", "a"], "ContainerHierarchyLabels": [[], []], "LeafNodeType": "It", "LeafNodeText": "passes", "LeafNodeLabels": ["Required"], "State": "passed", "RunTime": 2000000000},
	  {"ContainerHierarchyTexts": ["dns"], "ContainerHierarchyLabels": [["Optional", "DNS"]], "LeafNodeType": "It", "LeafNodeText": "fails", "State": "failed", "RunTime": 3000000000,
	   "Failure": {"Message": "Timed out after 20s.\nmore"}},
	  {"ContainerHierarchyLabels": [["Optional"]], "LeafNodeType": "It", "LeafNodeText": "skipped", "State": "skipped"},
	  {"ContainerHierarchyLabels": [[]], "LeafNodeType": "It", "LeafNodeText": "unlabelled", "State": "failed"}
	]}]`
	s, err := SummarizeConformance([]byte(report))
	if err != nil {
		t.Fatal(err)
	}
	if s.Required != (Tally{Passed: 1}) || s.Optional != (Tally{Failed: 1, Skipped: 1}) || s.RunTime != 5*time.Second {
		t.Errorf("summary %+v, want 1 Required passed, 1 Optional failed and 1 skipped, 5s", s)
	}
	if want := []string{"[Optional] dns fails: Timed out after 20s."}; !slices.Equal(s.Failed, want) {
		t.Errorf("failed %q, want %q", s.Failed, want)
	}
	if _, err := SummarizeConformance([]byte("{")); err == nil {
		t.Error("a truncated report was read")
	}
}
