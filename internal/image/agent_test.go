package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/peerlink/peerlink/internal/version"
)

// repoRoot is the repository root, relative to this package.
const repoRoot = "../.."

// TestAgentLayout builds the agent image for both release platforms into
// an OCI layout and inspects it as a registry client would: an index of
// two images, one per platform, whose configs, layers and binaries match
// their platform and carry the stamp.
func TestAgentLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the agent for two platforms (about a minute): skipped under -short")
	}
	stamp := version.Info{Version: "v1.2.3-test", Commit: "0123456789abcdef0123456789abcdef01234567"}
	a := Agent{Repo: repoRoot, Work: t.TempDir(), Platforms: ReleasePlatforms(), Stamp: stamp}
	built, err := a.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "peerlink-agent")
	if err := WriteLayout(dir, built); err != nil {
		t.Fatal(err)
	}

	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	// Digests, sizes, configs and layers agree with what they describe.
	if err := validate.Index(idx); err != nil {
		t.Fatalf("the layout's index does not validate: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", m.MediaType, types.OCIImageIndex)
	}
	wantLabels := map[string]string{
		AnnotationTitle:    "peerlink-agent",
		AnnotationVersion:  stamp.Version,
		AnnotationRevision: stamp.Commit,
		AnnotationSource:   source,
	}
	for k, v := range wantLabels {
		if m.Annotations[k] != v {
			t.Errorf("index annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var platforms []string
	for _, desc := range m.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s has no platform", desc.Digest)
		}
		plat := desc.Platform.OS + "/" + desc.Platform.Architecture
		platforms = append(platforms, plat)
		if desc.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: media type %s, want %s", plat, desc.MediaType, types.OCIManifestSchema1)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != desc.Platform.OS || cf.Architecture != desc.Platform.Architecture {
			t.Errorf("%s: config says %s/%s", plat, cf.OS, cf.Architecture)
		}
		if !slices.Equal(cf.Config.Entrypoint, []string{"/peerlink-agent"}) || cf.Config.User != "65532:65532" {
			t.Errorf("%s: entrypoint %v, user %q; want [/peerlink-agent], 65532:65532", plat, cf.Config.Entrypoint, cf.Config.User)
		}
		for k, v := range wantLabels {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", plat, k, cf.Config.Labels[k], v)
			}
		}
		bin := agentBinary(t, img)
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: the binary is not ELF: %v", plat, err)
		}
		if f.Machine != machines[desc.Platform.Architecture] {
			t.Errorf("%s: the binary is for %s", plat, f.Machine)
		}
		if slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
			t.Errorf("%s: the binary is linked dynamically", plat)
		}
		if desc.Platform.Architecture == runtime.GOARCH {
			runVersion(t, bin, stamp)
		}
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("index platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
}

// agentBinary returns the agent from the image's only layer.
func agentBinary(t *testing.T, img v1.Image) []byte {
	t.Helper()
	bin, _ := programEntry(t, img, "peerlink-agent")
	return bin
}

// programEntry checks that img has one layer whose first entry is the
// executable file name, and returns its content and the reader of the
// layer's next entries.
func programEntry(t *testing.T, img v1.Image, name string) ([]byte, *tar.Reader) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d (%v), want 1", len(layers), err)
	}
	tr := tar.NewReader(mutate.Extract(img))
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != name || hdr.Mode&0o111 == 0 {
		t.Fatalf("layer entry %q mode %o, want %s, executable", hdr.Name, hdr.Mode, name)
	}
	content, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	return content, tr
}

// runVersion runs the binary of this machine's platform with --version and
// checks that it prints the stamp.
func runVersion(t *testing.T, bin []byte, stamp version.Info) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "peerlink-agent")
	if err := os.WriteFile(file, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(file, "--version").Output()
	if err != nil {
		t.Fatalf("peerlink-agent --version: %v", err)
	}
	want := "peerlink-agent " + stamp.Version + " (commit " + stamp.Commit + ", " + runtime.Version() + ", linux/" + runtime.GOARCH + ")\n"
	if string(out) != want {
		t.Errorf("peerlink-agent --version printed %q, want %q", out, want)
	}
}

// TestGitStamp names builds of a git tree: by git describe, or as given;
// with the commit and whether the tree has changes. Without git only a
// given version names it, and a version that cannot be a tag is refused.
func TestGitStamp(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git: %v", err)
	}
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if _, err := GitStamp(t.Context(), repo, ""); err == nil || !strings.Contains(err.Error(), "set VERSION") {
		t.Errorf("stamp outside git: %v, want an error asking for VERSION", err)
	}
	s, err := GitStamp(t.Context(), repo, "v9.0.0")
	if err != nil || s != (version.Info{Version: "v9.0.0"}) {
		t.Errorf("stamp outside git with a version: %+v, %v", s, err)
	}

	git("init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "f")
	git("commit", "-qm", "one")
	head := git("rev-parse", "HEAD")
	s, err = GitStamp(t.Context(), repo, "")
	if err != nil || s.Commit != head || s.Modified || !strings.HasPrefix(head, s.Version) {
		t.Errorf("stamp of an untagged commit: %+v, %v; want the commit %s, abbreviated as version", s, err, head)
	}
	git("tag", "v1.2.3")
	s, err = GitStamp(t.Context(), repo, "")
	if err != nil || s != (version.Info{Version: "v1.2.3", Commit: head}) {
		t.Errorf("stamp of a tagged commit: %+v, %v", s, err)
	}
	// A new file changes the tree as a changed one does.
	for _, f := range []string{"new", "f"} {
		if err := os.WriteFile(filepath.Join(repo, f), []byte("2"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err = GitStamp(t.Context(), repo, "")
		if err != nil || s != (version.Info{Version: "v1.2.3-dirty", Commit: head, Modified: true}) {
			t.Errorf("stamp of a tree with %s written: %+v, %v", f, s, err)
		}
	}
	s, err = GitStamp(t.Context(), repo, "v2.0.0-rc.1")
	if err != nil || s != (version.Info{Version: "v2.0.0-rc.1", Commit: head, Modified: true}) {
		t.Errorf("stamp with a given version: %+v, %v", s, err)
	}
	for _, bad := range []string{"v1 2", "-v1", "v1+meta", strings.Repeat("v", 129)} {
		if _, err := GitStamp(t.Context(), repo, bad); err == nil || !strings.Contains(err.Error(), "image tag") {
			t.Errorf("version %q: %v, want refused as a tag", bad, err)
		}
	}
}

func TestParsePlatform(t *testing.T) {
	if p, err := ParsePlatform("linux/arm64"); err != nil || !p.Equals(v1.Platform{OS: "linux", Architecture: "arm64"}) {
		t.Errorf("linux/arm64: %+v, %v", p, err)
	}
	for _, bad := range []string{"arm64", "windows/amd64", "linux/", "linux/arm/v7"} {
		if _, err := ParsePlatform(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want an error naming it", bad, err)
		}
	}
}
