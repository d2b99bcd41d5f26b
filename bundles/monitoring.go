package bundles

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// dashboard is the Grafana dashboard of the monitoring bundle.
//
//go:embed monitoring/dashboard.json
var dashboard []byte

// metricName matches the names of the metrics a query reads: peerlink's
// own and controller-runtime's.
var metricName = regexp.MustCompile(`\b(?:peerlink|controller_runtime)_[a-z_]+\b`)

// DashboardMetrics returns the metrics the panels of the monitoring
// bundle's dashboard query, sorted, each once, as a scrape exposes them: a
// histogram's series (_bucket, _sum, _count) by the histogram's name.
func DashboardMetrics() ([]string, error) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("monitoring/dashboard.json: %w", err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("monitoring/dashboard.json: panel %q queries nothing", p.Title)
		}
		for _, t := range p.Targets {
			names := metricName.FindAllString(t.Expr, -1)
			if len(names) == 0 {
				return nil, fmt.Errorf("monitoring/dashboard.json: panel %q: query %q reads no metric of peerlink's", p.Title, t.Expr)
			}
			for _, n := range names {
				out = append(out, strings.TrimSuffix(n, "_bucket"))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
