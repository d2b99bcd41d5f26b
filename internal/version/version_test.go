package version

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestStampedBuild builds a program with the linker flags of a stamp and
// checks that it reports that stamp, with its own Go version and platform.
func TestStampedBuild(t *testing.T) {
	want := Info{Version: "v1.2.3-4-gabcdef0-dirty", Commit: "abcdef0123456789abcdef0123456789abcdef01", Modified: true}
	bin := filepath.Join(t.TempDir(), "printversion")
	build := exec.Command("go", "build", "-ldflags", LDFlags(want), "-o", bin, "./testdata/printversion")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	want.GoVersion, want.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
	if got != want {
		t.Errorf("stamped build reports %+v, want %+v", got, want)
	}
}

// TestFromBuild resolves a build's Info: the stamp wins whole; without one,
// a version the toolchain recorded and its VCS settings are used, and a
// tree built from source without a stamp has no version.
func TestFromBuild(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "feed"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name  string
		bi    debug.BuildInfo
		stamp Info
		want  Info
	}{
		{"stamp", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-x"}, Settings: vcs},
			Info{Version: "v1.0.0", Commit: "beef"}, Info{Version: "v1.0.0", Commit: "beef"}},
		{"go install at a version", debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, Info{}, Info{Version: "v0.3.0"}},
		{"go build in a checkout", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261101-feed+dirty"}, Settings: vcs},
			Info{}, Info{Version: "v0.0.0-20261101-feed+dirty", Commit: "feed", Modified: true}},
		{"go run", debug.BuildInfo{Main: debug.Module{Version: devel}}, Info{}, Info{}},
	} {
		got := fromBuild(&tc.bi, tc.stamp)
		tc.want.GoVersion, tc.want.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if got.Known() != (tc.want.Version != "") {
			t.Errorf("%s: Known() = %t", tc.name, got.Known())
		}
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		i    Info
		want string
	}{
		{Info{Version: "v0.3.0", Commit: "0123abcd", Modified: true, GoVersion: "go1.26.8", Platform: "linux/arm64"},
			"v0.3.0 (commit 0123abcd, modified, go1.26.8, linux/arm64)"},
		{Info{Version: "v0.3.0"}, "v0.3.0"},
		{Info{GoVersion: "go1.26.8"}, "unknown version (go1.26.8)"},
	} {
		if got := tc.i.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.i, got, tc.want)
		}
	}
}

// TestSkew warns only when both versions are known and differ.
func TestSkew(t *testing.T) {
	cli := Info{Version: "v0.3.0"}
	if s := cli.Skew("v0.2.0"); !strings.Contains(s, "controller runs version v0.2.0") || !strings.Contains(s, "this command is version v0.3.0") {
		t.Errorf("skew with v0.2.0: %q", s)
	}
	for _, controller := range []string{"v0.3.0", ""} {
		if s := cli.Skew(controller); s != "" {
			t.Errorf("skew with %q: %q, want none", controller, s)
		}
	}
	if s := (Info{}).Skew("v0.2.0"); s != "" {
		t.Errorf("a build without a version warns: %q", s)
	}
}

// TestReportSummary prints the client's version, and the controller's or
// why it is unknown when the report has one.
func TestReportSummary(t *testing.T) {
	client := Info{Version: "v0.3.0"}
	for _, tc := range []struct {
		r    Report
		want string
	}{
		{Report{Client: client}, "Client Version: " + client.String() + "\n"},
		{Report{Client: client, Controller: &ControllerVersion{Version: "v0.2.0"}}, "Client Version: " + client.String() + "\nController Version: v0.2.0\n"},
		{Report{Client: client, Controller: &ControllerVersion{}}, "Client Version: " + client.String() + "\nController Version: unknown (its info ConfigMap names none)\n"},
	} {
		var b strings.Builder
		tc.r.WriteSummary(&b, "info ConfigMap")
		if b.String() != tc.want {
			t.Errorf("summary %q, want %q", b.String(), tc.want)
		}
	}
}
