package version

import (
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
)

// The stamp of the build, set by the linker (LDFlags), so variables rather
// than constants; nothing assigns them at run time.
var (
	stampedVersion  string
	stampedCommit   string
	stampedModified string
)

// devel is the version the Go toolchain records for a main module built
// from a source tree rather than installed at a version.
const devel = "(devel)"

// Info identifies one build.
type Info struct {
	// Version names the build: a release tag, git describe output, or
	// empty when nothing recorded one (go run, go test).
	Version string `json:"version,omitempty"`
	// Commit is the full hash of the commit the build was made from.
	Commit string `json:"commit,omitempty"`
	// Modified says the tree had changes not in Commit.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go release that compiled the build.
	GoVersion string `json:"goVersion,omitempty"`
	// Platform is os/arch of the build.
	Platform string `json:"platform,omitempty"`
}

// Get returns the Info of the running binary.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	return fromBuild(bi, Info{Version: stampedVersion, Commit: stampedCommit, Modified: stampedModified == "true"})
}

// fromBuild resolves the Info of a binary from its build information and
// the stamp its linker flags set: a stamped version wins, with its commit
// and tree state; otherwise the module version and the VCS settings the Go
// toolchain recorded.
func fromBuild(bi *debug.BuildInfo, stamp Info) Info {
	i := Info{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if stamp.Version != "" {
		i.Version, i.Commit, i.Modified = stamp.Version, stamp.Commit, stamp.Modified
		return i
	}
	if v := bi.Main.Version; v != devel {
		i.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Commit = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// Known says the build names its version, so that it can be compared.
func (i Info) Known() bool { return i.Version != "" }

// String is the one-line form the commands print:
// "v0.3.0 (commit 0123abcd, modified, go1.26.8, linux/amd64)".
func (i Info) String() string {
	var details []string
	if i.Commit != "" {
		details = append(details, "commit "+i.Commit)
	}
	if i.Modified {
		details = append(details, "modified")
	}
	for _, s := range []string{i.GoVersion, i.Platform} {
		if s != "" {
			details = append(details, s)
		}
	}
	v := i.Version
	if v == "" {
		v = "unknown version"
	}
	if len(details) == 0 {
		return v
	}
	return v + " (" + strings.Join(details, ", ") + ")"
}

// Skew says how the controller's version differs from this build's, as a
// warning for the user; empty when they are the same or either is unknown
// (a build without a version, such as go run, is compared with nothing).
func (i Info) Skew(controller string) string {
	if !i.Known() || controller == "" || controller == i.Version {
		return ""
	}
	return fmt.Sprintf("the peerlink controller runs version %s, this command is version %s: use the same version, or expect flags and fields one of them does not know", controller, i.Version)
}

// LDFlags are the go build linker flags that stamp s into a binary
// importing this package. The values must not hold spaces.
func LDFlags(s Info) string {
	pkg := reflect.TypeFor[Info]().PkgPath()
	return fmt.Sprintf("-X %s.stampedVersion=%s -X %s.stampedCommit=%s -X %s.stampedModified=%t",
		pkg, s.Version, pkg, s.Commit, pkg, s.Modified)
}
