package images

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func TestLocalName(t *testing.T) {
	const reg = "172.30.1.1:5000"
	for in, want := range map[string]string{
		AgentImage:                             reg + "/peerlink/peerlink-agent:latest",
		"registry.k8s.io/pause:3.10":           reg + "/pause:3.10",
		reg + "/lab/echo:latest":               reg + "/lab/echo:latest",
		"ghcr.io/org/deep/name@sha256:" + "00": reg + "/org/deep/name@sha256:00",
	} {
		if got := LocalName(in, reg); got != want {
			t.Errorf("LocalName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestImageOf checks that a binary becomes a Linux image for this machine
// (the binaries are built for it) whose only
// layer holds it, executable, at /<name>, which is the entrypoint.
func TestImageOf(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	content := []byte("\x7fELF pretend")
	if err := os.WriteFile(bin, content, 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := imageOf(bin)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/tool" {
		t.Errorf("entrypoint %v, want [/tool]", cf.Config.Entrypoint)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d (%v), want 1", len(layers), err)
	}
	tr := tar.NewReader(mutate.Extract(img))
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != "tool" || hdr.Mode&0o111 == 0 {
		t.Errorf("layer entry %q mode %o, want tool, executable", hdr.Name, hdr.Mode)
	}
	got, err := io.ReadAll(tr)
	if err != nil || string(got) != string(content) {
		t.Errorf("layer content %q (%v), want the binary", got, err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("more than one entry in the layer: %v", err)
	}
}

// TestHostClosure lists what a host program needs on another root: for
// iptables, the link chain to the program that acts on its name and the
// shared libraries it loads.
func TestHostClosure(t *testing.T) {
	const program = "/usr/sbin/iptables"
	if _, err := os.Stat(program); err != nil {
		t.Skipf("no %s here: %v", program, err)
	}
	files, err := hostClosure([]string{program}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, program) {
		t.Errorf("closure %v lacks %s", files, program)
	}
	var libc bool
	for _, f := range files {
		libc = libc || strings.Contains(filepath.Base(f), "libc.so")
	}
	if !libc || len(files) < 3 {
		t.Errorf("closure %v lacks the shared libraries", files)
	}
}
