package manifests

import "testing"

// The parsers of the CLI's choice flags take the values they list and
// refuse others with a message that lists them.
func TestParseChoices(t *testing.T) {
	for _, tc := range []struct {
		parse     func(string) (string, error)
		good, bad string
		want      string
	}{
		{func(s string) (string, error) { v, err := ParseFormat(s); return string(v), err },
			"json", "xml", `unknown output format "xml": use yaml or json`},
		{func(s string) (string, error) { v, err := ParseServiceType(s); return string(v), err },
			"NodePort", "External", `unknown service type "External": use LoadBalancer, NodePort or ClusterIP`},
	} {
		if got, err := tc.parse(tc.good); err != nil || got != tc.good {
			t.Errorf("parse(%q) = %q, %v", tc.good, got, err)
		}
		if got, err := tc.parse(tc.bad); err == nil || err.Error() != tc.want || got != "" {
			t.Errorf("parse(%q) = %q, %v; want the error %s", tc.bad, got, err, tc.want)
		}
	}
}
