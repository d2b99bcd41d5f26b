package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// repoRoot is the repository root, relative to this package.
const repoRoot = ".."

// runCLI runs the command line as main does and returns what it printed and
// its exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

// golden compares got with the golden file, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// readArgs reads a case's command line, one argument per line.
func readArgs(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

// TestGenerators runs every case of testdata/generators twice: the output
// must match the golden file and be byte-identical between the runs. In the
// arguments, {{case}} is the case's directory and {{root}} the repository's;
// a case whose arguments hold {{dir}} writes a bundle there, and its output
// is the bundle's files.
func TestGenerators(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	cases, err := filepath.Glob(filepath.Join(repoRoot, "testdata", "generators", "*"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, dir := range cases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			args := readArgs(t, dir)
			var outputs [2][]byte
			for i := range outputs {
				outDir := filepath.Join(t.TempDir(), "bundle")
				run := make([]string, len(args))
				for j, a := range args {
					a = strings.ReplaceAll(a, "{{case}}", dir)
					a = strings.ReplaceAll(a, "{{root}}", repoRoot)
					run[j] = strings.ReplaceAll(a, "{{dir}}", outDir)
				}
				stdout, stderr, code := runCLI(t, run...)
				if code != 0 {
					t.Fatalf("exit code %d, stderr: %s", code, stderr)
				}
				if !strings.Contains(strings.Join(args, " "), "{{dir}}") {
					outputs[i] = []byte(stdout)
					continue
				}
				outputs[i] = dumpDir(t, outDir)
			}
			if !bytes.Equal(outputs[0], outputs[1]) {
				t.Fatalf("two runs differ:\n%s\n---\n%s", outputs[0], outputs[1])
			}
			golden(t, filepath.Join(dir, "output"), outputs[0])
		})
	}
}

// dumpDir prints every file of dir, sorted, with a header naming it.
func dumpDir(t *testing.T, dir string) []byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("### " + e.Name() + "\n")
		b.Write(data)
	}
	return b.Bytes()
}

// TestBadInput checks that bad input fails with exit code 1, one line on
// stderr naming the flag or field, and nothing on stdout.
func TestBadInput(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	garbage := filepath.Join(t.TempDir(), "garbage.kubeconfig")
	if err := os.WriteFile(garbage, []byte("this: [is not a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	key16 := "AAAAAAAAAAAAAAAAAAAAAA=="
	// create prints an object of kind for peer b, with flags.
	create := func(kind string, flags ...string) []string {
		return append(append([]string{"create", kind, "--remote-cluster-id", "b"}, flags...), "-o", "yaml")
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"invalid CIDR", create("configuration", "--pod-cidr", "10.0.0.0/33"), "--pod-cidr"},
		{"CIDR with host bits", create("configuration", "--pod-cidr", "10.244.1.0/16"), "--pod-cidr"},
		{"invalid external CIDR", create("configuration", "--pod-cidr", "10.244.0.0/16", "--external-cidr", "garbage"), "--external-cidr"},
		{"overlapping CIDRs", create("configuration", "--pod-cidr", "10.244.0.0/16", "--external-cidr", "10.244.0.0/24"), "--external-cidr"},
		{"no pod CIDR", create("configuration"), "--pod-cidr"},
		{"key not base64", create("publickey", "--public-key", "not a key!"), "--public-key"},
		{"key of 16 bytes", create("publickey", "--public-key", key16), "--public-key"},
		{"port 0", create("gatewayserver", "--port", "0"), "--port"},
		{"client port 0", create("gatewayclient", "--addresses", "1.2.3.4", "--port", "0"), "--port"},
		{"node port out of range", create("gatewayserver", "--service-type", "NodePort", "--node-port", "70000"), "--node-port"},
		{"node port with ClusterIP", create("gatewayserver", "--service-type", "ClusterIP", "--node-port", "30000"), "--node-port"},
		{"load balancer IP with NodePort", create("gatewayserver", "--service-type", "NodePort", "--load-balancer-ip", "192.0.2.1"), "--load-balancer-ip"},
		{"unknown service type", create("gatewayserver", "--service-type", "External"), "--service-type"},
		{"MTU too small", create("gatewayserver", "--mtu", "100"), "--mtu"},
		{"protocol TCP", create("gatewayclient", "--protocol", "TCP"), "--protocol"},
		{"bad address", create("gatewayclient", "--addresses", "not an address"), "--addresses"},
		{"numeric non-address", create("gatewayclient", "--addresses", "999.1.1.1", "--port", "30000"), "neither an IP address nor a DNS name"},
		{"loopback address", create("gatewayclient", "--addresses", "127.0.0.1", "--port", "30000"), "loopback"},
		{"unspecified address", create("gatewayclient", "--addresses", "0.0.0.0", "--port", "30000"), "unspecified"},
		{"duplicate address", create("gatewayclient", "--addresses", "192.0.2.1,192.0.2.1", "--port", "30000"), "Duplicate value"},
		{"link-local pod CIDR", create("configuration", "--pod-cidr", "169.254.0.0/16"), "refused (SpecialUse)"},
		{"default route pod CIDR", create("configuration", "--pod-cidr", "0.0.0.0/0"), "refused (SpecialUse)"},
		{"missing remote cluster id", []string{"create", "configuration", "--pod-cidr", "10.244.0.0/16", "-o", "yaml"}, "remote-cluster-id"},
		{"invalid remote cluster id", []string{"create", "gatewayserver", "--remote-cluster-id", "Cluster_B", "-o", "yaml"}, "--remote-cluster-id"},
		{"invalid name", []string{"create", "gatewayserver", "Not_A_Name", "--remote-cluster-id", "b", "-o", "yaml"}, "NAME"},
		{"unknown output format", []string{"create", "gatewayserver", "--remote-cluster-id", "b", "-o", "xml"}, "--output"},
		{"missing kubeconfig", []string{"create", "configuration", "--remote-cluster-id", "b", "--pod-cidr", "10.244.0.0/16", "--kubeconfig", "/nonexistent/kubeconfig"}, "--kubeconfig"},
		{"unreadable kubeconfig", []string{"generate", "configuration", "--kubeconfig", garbage}, "--kubeconfig"},
		{"unreadable remote kubeconfig", []string{"network", "connect", "--kubeconfig", garbage, "--remote-kubeconfig", garbage}, "--kubeconfig"},
		{"network with a namespace", []string{"network", "disconnect", "-n", "x", "--remote-kubeconfig", garbage}, "--namespace"},
		{"missing remote kubeconfig", []string{"network", "reset", "--kubeconfig", garbage}, "--remote-kubeconfig"},
		{"connect with bad service type", []string{"network", "connect", "--remote-kubeconfig", garbage, "--gw-server-service-type", "Foo"}, "--gw-server-service-type"},
		{"connect with too many server replicas", []string{"network", "connect", "--remote-kubeconfig", garbage, "--gw-server-replicas", "9"}, "--gw-server-replicas"},
		{"connect with a bad client port", []string{"network", "connect", "--remote-kubeconfig", garbage, "--gw-client-port", "70000"}, "--gw-client-port"},
		{"bundle role", []string{"bundle", "init", t.TempDir(), "--peer", "b", "--role", "both"}, "--role"},
		{"bundle server flag on client", []string{"bundle", "init", t.TempDir(), "--peer", "b", "--role", "client", "--node-port", "30000"}, "--node-port"},
		{"render without input", []string{"render"}, "-f"},
		{"render with both inputs", []string{"render", t.TempDir(), "-f", garbage}, "not both"},
		{"render with unreadable cluster info", []string{"render", filepath.Join(repoRoot, "bundles", "examples", "cluster-a", "peer-cluster-b"), "--cluster-info", "/nonexistent/info.yaml"}, "--cluster-info"},
		{"bundle add of a private key", []string{"bundle", "add", filepath.Join(repoRoot, "bundles", "examples", "cluster-a", "peer-cluster-b"), filepath.Join(repoRoot, "testdata", "bundles", "bad", "private-key-secret", "secret.yaml")}, "not Secret"},
		{"generate kubeconfig without a peer", []string{"generate", "kubeconfig"}, "remote-cluster-id"},
		{"generate kubeconfig bad address", []string{"generate", "kubeconfig", "--remote-cluster-id", "b", "--address", "10.70.0.1"}, "--address"},
		{"generate kubeconfig short token", []string{"generate", "kubeconfig", "--remote-cluster-id", "b", "--duration", "1m"}, "--duration"},
		{"connect in band short token", []string{"network", "connect", "--remote-kubeconfig", garbage, "--in-band", "--in-band-token-duration", "1m"}, "--in-band-token-duration"},
		{"generate publickey gateway type", []string{"generate", "publickey", "--gateway-type", "middle", "--gateway-name", "b"}, "--gateway-type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tt.args...)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("stdout is not empty: %q", stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
				t.Errorf("stderr is not one line: %q", stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not name %s", stderr, tt.want)
			}
		})
	}
}

// TestHelp checks that every command documents itself with examples, and
// that the completion scripts are generated.
func TestHelp(t *testing.T) {
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.Name() != "help" && strings.TrimSpace(cmd.Example) == "" {
			t.Errorf("%q has no examples", cmd.CommandPath())
		}
		if cmd.Short == "" {
			t.Errorf("%q has no short description", cmd.CommandPath())
		}
		for _, c := range cmd.Commands() {
			walk(c)
		}
	}
	walk(newRootCmd())
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		stdout, stderr, code := runCLI(t, "completion", shell)
		if code != 0 || !strings.Contains(stdout, "peerlink") {
			t.Errorf("completion %s: exit %d, %s", shell, code, stderr)
		}
	}
	stdout, _, code := runCLI(t, "create", "gatewayserver", "--help")
	if code != 0 || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "--kubeconfig") {
		t.Errorf("create gatewayserver --help:\n%s", stdout)
	}
}

// TestConfirm checks the question of the destructive commands: only a yes
// goes on, and no answer at all names --skip-confirm.
func TestConfirm(t *testing.T) {
	for _, c := range []struct {
		answer, err string
	}{
		{"yes\n", ""}, {"y", ""}, {" YES \n", ""},
		{"no\n", "cancelled"}, {"\n", "cancelled"}, {"maybe\n", "cancelled"},
		{"", "--skip-confirm"},
	} {
		var out bytes.Buffer
		err := confirm(strings.NewReader(c.answer), &out, "Remove it?")
		if !strings.HasPrefix(out.String(), "Remove it? [y/N]: ") {
			t.Errorf("answer %q: the question reads %q", c.answer, out.String())
		}
		switch {
		case c.err == "" && err != nil:
			t.Errorf("answer %q: %v", c.answer, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("answer %q: error %v, want one saying %q", c.answer, err, c.err)
		}
	}
}
