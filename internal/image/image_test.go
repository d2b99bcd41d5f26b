package image

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestOf checks that a program becomes an OCI image of its platform whose
// only layer holds it, executable, at /<name>, which is the entrypoint,
// with the host files at their own paths, links kept as links.
func TestOf(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	content := []byte("\x7fELF pretend")
	if err := os.WriteFile(bin, content, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("tool", link); err != nil {
		t.Fatal(err)
	}
	img, err := Of(Program{
		File:      bin,
		Platform:  v1.Platform{OS: "linux", Architecture: "arm64"},
		HostFiles: []string{link},
		User:      "1:2",
		Env:       []string{"A=b"},
		Labels:    map[string]string{"k": "v"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s (%v), want OCI", mt, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "arm64" {
		t.Errorf("platform %s/%s, want linux/arm64", cf.OS, cf.Architecture)
	}
	c := cf.Config
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/tool" || c.User != "1:2" || len(c.Env) != 1 || c.Labels["k"] != "v" {
		t.Errorf("config %+v, want entrypoint [/tool], user 1:2, env A=b, label k=v", c)
	}
	got, tr := programEntry(t, img, "tool")
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if mt, err := layers[0].MediaType(); err != nil || mt != types.OCILayer {
		t.Errorf("layer media type %s (%v), want OCI", mt, err)
	}
	if string(got) != string(content) {
		t.Errorf("layer content %q, want the program", got)
	}
	hdr, err := tr.Next()
	if err != nil || hdr.Name != link[1:] || hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "tool" {
		t.Errorf("second entry %+v (%v), want the link %s to tool", hdr, err, link)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("more than two entries in the layer: %v", err)
	}

	again, err := Of(Program{File: bin, Platform: v1.Platform{OS: "linux", Architecture: "arm64"}, HostFiles: []string{link}, User: "1:2", Env: []string{"A=b"}, Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("the same files make images %s and %s", d1, d2)
	}
}

// TestOfHostFiles makes an image of host files alone, as the lab's tool
// images are: no program of its own, links written into the layer, and
// the entrypoint given or none at all (the pod's command runs).
func TestOfHostFiles(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "multi")
	if err := os.WriteFile(prog, []byte("\x7fELF multi"), 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{"/bin/sh": prog, "/bin/awk": prog}
	for _, tc := range []struct {
		entrypoint []string
	}{{nil}, {[]string{prog, "-v"}}} {
		img, err := Of(Program{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, HostFiles: []string{prog}, Links: links, Entrypoint: tc.entrypoint})
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cf.Config.Entrypoint, tc.entrypoint) {
			t.Errorf("entrypoint %q, want %q", cf.Config.Entrypoint, tc.entrypoint)
		}
		var entries []string
		tr := tar.NewReader(mutate.Extract(img))
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, hdr.Name+" -> "+hdr.Linkname)
		}
		want := []string{prog[1:] + " -> ", "bin/awk -> " + prog, "bin/sh -> " + prog}
		if !slices.Equal(entries, want) {
			t.Errorf("layer entries %q, want %q", entries, want)
		}
	}
}
