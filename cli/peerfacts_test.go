package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// infoForms are the two forms of a cluster-info file, as peerlink info -o
// yaml prints it and as the ConfigMap is saved.
var infoForms = []string{"info", "configmap"}

// writeClusterInfo writes cluster-a's facts in form, with the allowlist and
// the address plan given as comma-separated lists (left out when empty),
// and returns the file's path.
func writeClusterInfo(t *testing.T, form, allowed, routed string) string {
	t.Helper()
	var b strings.Builder
	// list writes a comma-separated list in the form's own notation.
	var list func(key, values string)
	switch form {
	case "info":
		b.WriteString("clusterID: cluster-a\nnetwork:\n  podCIDRs: [10.245.0.0/24]\n")
		list = func(key, values string) { b.WriteString("  " + key + ": [" + values + "]\n") }
	case "configmap":
		b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: peerlink-cluster-info\ndata:\n  clusterID: cluster-a\n  podCIDRs: 10.245.0.0/24\n")
		list = func(key, values string) { b.WriteString("  " + key + ": " + values + "\n") }
	default:
		t.Fatalf("unknown form %q", form)
	}
	if allowed != "" {
		list("allowedPeerCIDRs", allowed)
	}
	if routed != "" {
		list("routedPeerCIDRs", routed)
	}
	if form == "info" {
		b.WriteString("peers: []\n")
	}
	path := filepath.Join(t.TempDir(), form+".yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The placements and refusals of publicBundle's ranges, as lint reports
// them after the file.
const (
	podRouted      = "Configuration liqo-tenant-cluster-b/cluster-b: peer range spec.remote.cidr.pod[0] 10.244.0.0/24: routed as it is (in plan 10.244.0.0/16)"
	podRemapped    = "Configuration liqo-tenant-cluster-b/cluster-b: peer range spec.remote.cidr.pod[0] 10.244.0.0/24: remapped"
	externalRemap  = "Configuration liqo-tenant-cluster-b/cluster-b: peer range spec.remote.cidr.external[0] 8.8.8.0/24: remapped"
	externalRefuse = "Configuration liqo-tenant-cluster-b/cluster-b: spec.remote.cidr.external[0]: 8.8.8.0/24 refused (NotAllowed)"
)

// TestLintPeerFacts: lint holds the peer's ranges to the allowlist and the
// address plan for peers of the flags or of --cluster-info in either form,
// the flags winning over the file, and reports each range the plan is
// known for as routed as it is or remapped, on INFO lines that are no
// findings.
func TestLintPeerFacts(t *testing.T) {
	dir := publicBundle(t)
	// info is the line of a placement in the bundle's configuration.yaml.
	info := func(placement string) string {
		return "INFO   " + filepath.Join(dir, "configuration.yaml") + ": " + placement
	}
	for _, form := range infoForms {
		planned := writeClusterInfo(t, form, "10.0.0.0/8, 8.8.8.0/24", "10.244.0.0/16")
		defaults := writeClusterInfo(t, form, "", "")
		for _, tc := range []struct {
			name string
			args []string
			code int
			// want are printed in this order; wantNot is not printed.
			want, wantNot []string
		}{
			{"plan of the flags", []string{"--allowed-peer-cidr", "10.0.0.0/8,8.8.8.0/24", "--routed-peer-cidr", "10.244.0.0/16"}, 0,
				[]string{info(podRouted), info(externalRemap), "no findings"}, nil},
			{"empty plan of the flags", []string{"--allowed-peer-cidr", "10.0.0.0/8,8.8.8.0/24", "--routed-peer-cidr", ""}, 0,
				[]string{info(podRemapped), info(externalRemap), "no findings"}, nil},
			{"no plan", []string{"--allowed-peer-cidr", "10.0.0.0/8,8.8.8.0/24"}, 0, []string{"no findings"}, []string{"INFO"}},
			{"file", []string{"--cluster-info", planned}, 0,
				[]string{info(podRouted), info(externalRemap), "no findings"}, nil},
			{"file of the defaults", []string{"--cluster-info", defaults}, 1,
				[]string{externalRefuse, info(podRemapped)}, []string{"external[0] 8.8.8.0/24: remapped"}},
			{"allowlist of the flag over the file's", []string{"--cluster-info", planned, "--allowed-peer-cidr", "10.0.0.0/8"}, 1,
				[]string{externalRefuse, info(podRouted)}, nil},
			{"allowlist of the file beside the flag's plan", []string{"--cluster-info", planned, "--routed-peer-cidr", "10.0.0.0/8"}, 0,
				[]string{info(strings.Replace(podRouted, "10.244.0.0/16", "10.0.0.0/8", 1)), info(externalRemap), "no findings"}, nil},
			{"plan of the flag over the file's", []string{"--cluster-info", planned, "--routed-peer-cidr", ""}, 0,
				[]string{info(podRemapped), info(externalRemap), "no findings"}, nil},
			{"plan of the file beside the flag's allowlist", []string{"--cluster-info", defaults, "--allowed-peer-cidr", "10.0.0.0/8,8.8.8.0/24"}, 0,
				[]string{info(podRemapped), info(externalRemap), "no findings"}, nil},
		} {
			t.Run(form+"/"+tc.name, func(t *testing.T) {
				stdout, stderr, code := runCLI(t, append([]string{"lint", dir}, tc.args...)...)
				if code != tc.code {
					t.Errorf("exit code %d, want %d; stderr %s", code, tc.code, stderr)
				}
				rest := stdout
				for _, w := range tc.want {
					i := strings.Index(rest, w)
					if i < 0 {
						t.Fatalf("stdout:\n%s\nwant, in order, %q", stdout, tc.want)
					}
					rest = rest[i+len(w):]
				}
				for _, w := range tc.wantNot {
					if strings.Contains(stdout, w) {
						t.Errorf("stdout:\n%s\nwant no %q", stdout, w)
					}
				}
			})
		}
	}
}

// TestCreateConfigurationPeerFacts: create configuration holds the peer's
// ranges to the allowlist of --cluster-info in either form, unless
// --allowed-peer-cidr gives another, and reports where each range goes on
// standard error, leaving the manifest alone on standard output.
func TestCreateConfigurationPeerFacts(t *testing.T) {
	create := []string{"create", "configuration", "--remote-cluster-id", "cluster-b", "--pod-cidr", "10.244.0.0/24", "--external-cidr", "10.70.0.0/16", "-o", "yaml"}
	for _, form := range infoForms {
		narrow := writeClusterInfo(t, form, "10.244.0.0/16", "10.244.0.0/16")
		for _, tc := range []struct {
			name string
			args []string
			// err is the error, when the command fails; want are the
			// lines of stderr otherwise.
			err  string
			want []string
		}{
			{"outside the file's allowlist", []string{"--cluster-info", narrow}, "--external-cidr: 10.70.0.0/16 refused (NotAllowed): outside the allowed peer ranges 10.244.0.0/16 (--cluster-info " + narrow + ": allowedPeerCIDRs)", nil},
			{"allowlist of the flag over the file's", []string{"--cluster-info", narrow, "--allowed-peer-cidr", "10.0.0.0/8"}, "", []string{
				"INFO   peer range spec.remote.cidr.pod[0] 10.244.0.0/24: routed as it is (in plan 10.244.0.0/16)",
				"INFO   peer range spec.remote.cidr.external[0] 10.70.0.0/16: remapped",
			}},
			{"an IPv6 pod range beside the IPv4 one", []string{"--pod-cidr", "fd44:2::/48", "--routed-peer-cidr", "fd44::/16"}, "", []string{
				"INFO   peer range spec.remote.cidr.pod[0] 10.244.0.0/24: remapped",
				"INFO   peer range spec.remote.cidr.pod[1] fd44:2::/48: routed as it is (in plan fd44::/16)",
				"INFO   peer range spec.remote.cidr.external[0] 10.70.0.0/16: remapped",
			}},
			{"an IPv6 range outside the allowlist", []string{"--pod-cidr", "2a01:4f8::/48"}, "--pod-cidr: 2a01:4f8::/48 refused (NotAllowed): outside the allowed peer ranges 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7 (--allowed-peer-cidr)", nil},
			{"plan of the flag over the file's", []string{"--cluster-info", narrow, "--allowed-peer-cidr", "10.0.0.0/8", "--routed-peer-cidr", "10.70.0.0/16"}, "", []string{
				"INFO   peer range spec.remote.cidr.pod[0] 10.244.0.0/24: remapped",
				"INFO   peer range spec.remote.cidr.external[0] 10.70.0.0/16: routed as it is (in plan 10.70.0.0/16)",
			}},
		} {
			t.Run(form+"/"+tc.name, func(t *testing.T) {
				stdout, stderr, code := runCLI(t, append(create, tc.args...)...)
				if tc.err != "" {
					if code != 1 || stdout != "" || stderr != "error: "+tc.err+"\n" {
						t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing and %q", code, stdout, stderr, tc.err)
					}
					return
				}
				if code != 0 || !strings.HasPrefix(stdout, "apiVersion: networking.liqo.io/v1beta1\nkind: Configuration\n") {
					t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
				}
				if got := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Errorf("stderr:\n%s\nwant:\n%s", stderr, strings.Join(tc.want, "\n"))
				}
			})
		}
	}
}

// TestPeerFactsEveryCommand: bundle add, lint, create configuration and
// render take the facts of --cluster-info the same way, refuse a bad one
// naming the file and the field, and change nothing then.
func TestPeerFactsEveryCommand(t *testing.T) {
	dir := publicBundle(t)
	peer := filepath.Join(t.TempDir(), "from-cluster-b.yaml")
	conf, stderr, code := runCLI(t, "create", "configuration", "--remote-cluster-id", "cluster-b", "--pod-cidr", "10.244.0.0/24", "-o", "yaml")
	if code != 0 {
		t.Fatalf("create configuration: %s", stderr)
	}
	if err := os.WriteFile(peer, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	commands := map[string][]string{
		"bundle add":           {"bundle", "add", dir, peer},
		"lint":                 {"lint", dir},
		"create configuration": {"create", "configuration", "--remote-cluster-id", "cluster-b", "--pod-cidr", "10.244.0.0/24", "-o", "yaml"},
		"render":               {"render", dir},
	}
	for _, form := range infoForms {
		for _, tc := range []struct {
			name             string
			allowed, routed  string
			extra            []string
			wantErr, wantOut string
		}{
			{name: "bad plan", allowed: "10.0.0.0/8, 8.8.8.0/24", routed: "169.254.0.0/16", wantErr: ": routedPeerCIDRs: routed range 0 (169.254.0.0/16)"},
			{name: "bad allowlist", allowed: "0.0.0.0/0", wantErr: ": allowedPeerCIDRs: allowed range 0 (0.0.0.0/0)"},
			{name: "bad plan under a flag", allowed: "10.0.0.0/8, 8.8.8.0/24", routed: "169.254.0.0/16", extra: []string{"--routed-peer-cidr", "10.244.0.0/16"},
				wantErr: ": routedPeerCIDRs: routed range 0 (169.254.0.0/16)"},
			{name: "plan", allowed: "10.0.0.0/8, 8.8.8.0/24", routed: "10.244.0.0/16", wantOut: "10.244.0.0/24: routed as it is (in plan 10.244.0.0/16)"},
		} {
			path := writeClusterInfo(t, form, tc.allowed, tc.routed)
			for name, args := range commands {
				t.Run(form+"/"+tc.name+"/"+name, func(t *testing.T) {
					before := digest(t, dir)
					stdout, stderr, code := runCLI(t, append(append(args, "--cluster-info", path), tc.extra...)...)
					if tc.wantErr != "" {
						if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--cluster-info "+path+tc.wantErr) {
							t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing and one line naming %q", code, stdout, stderr, tc.wantErr)
						}
						if digest(t, dir) != before {
							t.Errorf("the bundle changed")
						}
						return
					}
					if code != 0 {
						t.Fatalf("exit %d, stderr %s", code, stderr)
					}
					if name == "render" {
						// Render shows the placement as the status.
						if status := stdout[strings.LastIndex(stdout, "status:"):]; !strings.Contains(status, "pod:\n      - 10.244.0.0/24") {
							t.Errorf("status:\n%s\nwant the pod range as it is", status)
						}
						return
					}
					if !strings.Contains(stdout+stderr, tc.wantOut) {
						t.Errorf("stdout:\n%s\nstderr:\n%s\nwant %q", stdout, stderr, tc.wantOut)
					}
				})
			}
		}
	}

	// Render remaps the Configurations only with this cluster's ranges: the
	// flags of the facts need the file.
	for _, args := range [][]string{
		{"render", dir, "--routed-peer-cidr", "10.244.0.0/16"},
		{"render", "-f", peer, "--allowed-peer-cidr", "10.0.0.0/8"},
	} {
		if stdout, stderr, code := runCLI(t, args...); code != 1 || stdout != "" || !strings.Contains(stderr, args[len(args)-2]+": only with") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}
