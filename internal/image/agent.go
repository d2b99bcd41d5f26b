package image

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/peerlink/peerlink/internal/gitcmd"
	"github.com/peerlink/peerlink/internal/version"
)

const (
	// AgentName is the agent's binary and the last element of its image
	// repository.
	AgentName = "peerlink-agent"
	// agentPackage is the agent's Go package, from the repository root.
	agentPackage = "./cmd/" + AgentName
	// source is where the images' sources are published.
	source = "https://github.com/peerlink/peerlink"
	// agentUser runs the agent unless a manifest says otherwise: the
	// controller runs as it, the gateway and fabric pods ask for root.
	agentUser = "65532:65532"
)

// The OCI annotation keys the images and the index carry (as labels in
// the images' config).
const (
	AnnotationVersion  = "org.opencontainers.image.version"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationTitle    = "org.opencontainers.image.title"
)

// ReleasePlatforms are the platforms `make images` builds the agent for.
func ReleasePlatforms() []v1.Platform {
	return []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
}

// HostPlatform is the platform of this machine, the only one the lab
// builds for.
func HostPlatform() v1.Platform { return v1.Platform{OS: "linux", Architecture: runtime.GOARCH} }

// ParsePlatform reads os/arch, such as linux/arm64.
func ParsePlatform(s string) (v1.Platform, error) {
	os, arch, ok := strings.Cut(s, "/")
	if !ok || os != "linux" || arch == "" || strings.Contains(arch, "/") {
		return v1.Platform{}, fmt.Errorf("platform %q: want linux/<arch>, such as linux/arm64", s)
	}
	return v1.Platform{OS: os, Architecture: arch}, nil
}

// tagSyntax is what an image tag may be, and so a version.
var tagSyntax = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// GitStamp names the build of the tree at repo: the given version, else
// what git describe says (the latest tag, commits since, the commit) and
// -dirty for a tree with changes, new files included; the commit of HEAD,
// and whether the tree has changes. Without git, only a given version
// names the build. The version must be usable as an image tag.
func GitStamp(ctx context.Context, repo, given string) (version.Info, error) {
	git := func(args ...string) (string, error) { return gitcmd.Output(ctx, repo, args...) }
	s := version.Info{Version: given}
	commit, err := git("rev-parse", "HEAD")
	if err != nil {
		if given == "" {
			return version.Info{}, fmt.Errorf("no version for the build: %w (set VERSION)", err)
		}
	} else {
		s.Commit = commit
		status, err := git("status", "--porcelain")
		if err != nil {
			return version.Info{}, err
		}
		s.Modified = status != ""
		if s.Version == "" {
			if s.Version, err = git("describe", "--tags", "--always"); err != nil {
				return version.Info{}, err
			}
			// Not describe --dirty, which overlooks new files: a build
			// holds them.
			if s.Modified {
				s.Version += "-dirty"
			}
		}
	}
	if !tagSyntax.MatchString(s.Version) {
		return version.Info{}, fmt.Errorf("version %q: not usable as an image tag (letters, digits, _ . -, at most 128, not starting with . or -)", s.Version)
	}
	return s, nil
}

// Agent is one build of the agent image.
type Agent struct {
	// Repo is the root of the peerlink source tree.
	Repo string
	// Work takes the compiled binaries, one directory per platform.
	Work string
	// Platforms are the platforms to build for, linux only.
	Platforms []v1.Platform
	// Stamp is written into every binary (version.LDFlags) and labels
	// the images and the index.
	Stamp version.Info
}

// Build cross-compiles the agent for each platform, statically, and
// returns the index of its images, one per platform in the order given.
func (a Agent) Build(ctx context.Context) (v1.ImageIndex, error) {
	if len(a.Platforms) == 0 {
		return nil, errors.New("agent image: no platform to build for")
	}
	if a.Stamp.Version == "" {
		return nil, errors.New("agent image: the build has no version")
	}
	annotations := map[string]string{
		AnnotationTitle:   AgentName,
		AnnotationVersion: a.Stamp.Version,
		AnnotationSource:  source,
	}
	if a.Stamp.Commit != "" {
		annotations[AnnotationRevision] = a.Stamp.Commit
	}
	var idx v1.ImageIndex = empty.Index
	for _, p := range a.Platforms {
		bin := filepath.Join(a.Work, p.OS+"-"+p.Architecture, AgentName)
		if err := Compile(ctx, a.Repo, agentPackage, bin, p, a.Stamp); err != nil {
			return nil, err
		}
		img, err := Of(Program{File: bin, Platform: p, User: agentUser, Labels: annotations})
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture}},
		})
	}
	return mutate.Annotations(idx, annotations).(v1.ImageIndex), nil
}

// Compile builds the main package pkg of the tree at repo for p into bin:
// static (no cgo), without the paths of this machine or debugging symbols,
// with the stamp s.
func Compile(ctx context.Context, repo, pkg, bin string, p v1.Platform, s version.Info) error {
	args := []string{"build", "-trimpath", "-ldflags", "-s -w " + version.LDFlags(s), "-o", bin, pkg}
	cmd := exec.CommandContext(ctx, cmp.Or(os.Getenv("GO"), "go"), args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s for %s/%s: %w\n%s", pkg, p.OS, p.Architecture, err, out)
	}
	return nil
}
