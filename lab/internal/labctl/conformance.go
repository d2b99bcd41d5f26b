package labctl

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DefaultConformanceDir is where Conformance keeps its lab unless told
// otherwise: apart from the lab of `make lab`, so that both can run.
const DefaultConformanceDir = DefaultDir + "-conformance"

// ConformanceOptions configure Conformance.
type ConformanceOptions struct {
	// Suite is the directory of the Multi-Cluster Services conformance
	// suite: the conformance/ module of a checkout of the mcs-api
	// repository, whose go.mod replaces the API module with the checkout.
	Suite string
	// Dir holds the lab, the compiled suite and its reports.
	Dir string
	// Repo is the root of the peerlink repository.
	Repo string
	// Out receives progress and the suite's output.
	Out io.Writer
	// Args are passed to the suite after the lab's flags, such as
	// -ginkgo.label-filter=Required.
	Args []string
	// Keep leaves the clusters running after the run.
	Keep bool
}

// conformanceContexts name the two clusters, and so the contexts of the
// lab's kubeconfig the suite is given; the suite treats the first as the
// exporting one.
var conformanceContexts = []string{"mcs-1", "mcs-2"}

// Conformance runs the Multi-Cluster Services conformance suite against two
// fresh clusters of the lab, peered, with imports allowed in every
// namespace (the suite makes a namespace per spec), and prints how many of
// its Required and Optional specs passed. The suite's own reports are left
// in Dir/conformance.
func Conformance(ctx context.Context, o ConformanceOptions) (err error) {
	if o.Suite == "" {
		return errors.New("no conformance suite: give the conformance/ directory of a checkout of the mcs-api repository")
	}
	suite, err := filepath.Abs(o.Suite)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(suite, "go.mod")); err != nil {
		return fmt.Errorf("conformance suite %s: %w", suite, err)
	}
	work := filepath.Join(o.Dir, "conformance")
	p := NewProgress(o.Out)
	// Built before the lab comes up, so that a suite that does not build
	// costs no cluster. Outside the lab's directory, which Up empties.
	bin, err := os.MkdirTemp("", "mcs-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	test := filepath.Join(bin, "conformance.test")
	build := exec.CommandContext(ctx, cmp.Or(os.Getenv("GO"), "go"), "test", "-c", "-o", test, ".")
	build.Dir, build.Stdout, build.Stderr = suite, o.Out, o.Out
	if err := build.Run(); err != nil {
		return fmt.Errorf("build the conformance suite in %s: %w", suite, err)
	}
	p.Logf("built the conformance suite of %s", suite)

	l, err := Up(ctx, Options{
		Dir: o.Dir, Names: conformanceContexts, Repo: o.Repo, Out: o.Out,
		ImportAllNamespaces: true,
	})
	if !o.Keep {
		defer func() {
			if derr := Down(o.Dir, o.Out); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	if err != nil {
		return err
	}
	a, b := l.Clusters[0], l.Clusters[1]
	if out, err := l.Connect(ctx, a, b); err != nil {
		return fmt.Errorf("connect %s to %s: %w\n%s", a.Name, b.Name, err, out)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := l.WaitConnected(wctx, a, b); err != nil {
		return err
	}
	p.Logf("%s and %s Connected", a.Name, b.Name)

	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	report := filepath.Join(work, "report.json")
	args := append([]string{
		"-test.timeout=2h", "-test.v",
		"-kubeconfig=" + l.Kubeconfig(), "-contexts=" + strings.Join(conformanceContexts, ","),
		"-ginkgo.v", "-ginkgo.json-report=" + report, "-ginkgo.junit-report=" + filepath.Join(work, "junit.xml"),
	}, o.Args...)
	run := exec.CommandContext(ctx, test, args...)
	// The suite writes its HTML report to its working directory.
	run.Dir, run.Stdout, run.Stderr = work, o.Out, o.Out
	start := time.Now()
	runErr := run.Run()
	p.Logf("the suite ran for %s; its reports are in %s", time.Since(start).Round(time.Second), work)
	data, err := os.ReadFile(report)
	if err != nil {
		return errors.Join(runErr, fmt.Errorf("conformance report: %w", err))
	}
	s, err := SummarizeConformance(data)
	if err != nil {
		return errors.Join(runErr, err)
	}
	s.Print(o.Out)
	if runErr != nil {
		return fmt.Errorf("conformance suite: %w", runErr)
	}
	return nil
}

// ConformanceSummary counts the suite's specs by the label that says
// whether an implementation must pass them.
type ConformanceSummary struct {
	// Required and Optional count the specs with that label.
	Required, Optional Tally
	// Failed names every spec that did not pass and was not skipped, with
	// its label and the first line of its failure.
	Failed []string
	// RunTime is the time the suite's specs took.
	RunTime time.Duration
}

// Tally counts specs by outcome.
type Tally struct{ Passed, Failed, Skipped int }

// Print writes the summary.
func (s ConformanceSummary) Print(out io.Writer) {
	fmt.Fprintf(out, "Required: %d passed, %d failed, %d skipped\n", s.Required.Passed, s.Required.Failed, s.Required.Skipped)
	fmt.Fprintf(out, "Optional: %d passed, %d failed, %d skipped\n", s.Optional.Passed, s.Optional.Failed, s.Optional.Skipped)
	fmt.Fprintf(out, "specs ran for %s\n", s.RunTime.Round(time.Second))
	for _, f := range s.Failed {
		fmt.Fprintf(out, "  failed: %s\n", f)
	}
}

// specReport is the part of a Ginkgo JSON report's spec that the summary
// reads.
type specReport struct {
	ContainerHierarchyTexts  []string
	ContainerHierarchyLabels [][]string
	LeafNodeType             string
	LeafNodeText             string
	LeafNodeLabels           []string
	State                    string
	RunTime                  time.Duration
	Failure                  struct{ Message string }
}

// SummarizeConformance reads a Ginkgo JSON report (-ginkgo.json-report) of
// the conformance suite.
func SummarizeConformance(data []byte) (ConformanceSummary, error) {
	var reports []struct{ SpecReports []specReport }
	if err := json.Unmarshal(data, &reports); err != nil {
		return ConformanceSummary{}, fmt.Errorf("conformance report: %w", err)
	}
	var s ConformanceSummary
	for _, r := range reports {
		for _, spec := range r.SpecReports {
			if spec.LeafNodeType != "It" {
				continue
			}
			labels := slices.Concat(append(spec.ContainerHierarchyLabels, spec.LeafNodeLabels)...)
			var t *Tally
			var label string
			switch {
			case slices.Contains(labels, "Required"):
				t, label = &s.Required, "Required"
			case slices.Contains(labels, "Optional"):
				t, label = &s.Optional, "Optional"
			default:
				continue
			}
			s.RunTime += spec.RunTime
			switch spec.State {
			case "passed":
				t.Passed++
			case "skipped", "pending":
				t.Skipped++
			default:
				t.Failed++
				text := strings.TrimSpace(strings.Join(append(slices.Clone(spec.ContainerHierarchyTexts), spec.LeafNodeText), " "))
				first, _, _ := strings.Cut(strings.TrimSpace(spec.Failure.Message), "\n")
				s.Failed = append(s.Failed, fmt.Sprintf("[%s] %s: %s", label, text, first))
			}
		}
	}
	slices.Sort(s.Failed)
	return s, nil
}
