package image

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// smallIndex is an index of one small image, annotated with version v.
func smallIndex(t *testing.T, content, v string) v1.ImageIndex {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(file, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := Of(Program{File: file, Platform: HostPlatform()})
	if err != nil {
		t.Fatal(err)
	}
	p := HostPlatform()
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	return mutate.Annotations(idx, map[string]string{AnnotationVersion: v}).(v1.ImageIndex)
}

// TestWriteLayout writes a layout that reads back as the same index,
// replaces an older layout without keeping its blobs, and refuses a
// directory that holds something else.
func TestWriteLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	if err := WriteLayout(dir, smallIndex(t, "old", "v1")); err != nil {
		t.Fatal(err)
	}
	idx := smallIndex(t, "new", "v2")
	if err := WriteLayout(dir, idx); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if d, err := got.Digest(); err != nil || d != want {
		t.Errorf("layout index %s (%v), want %s", d, err, want)
	}
	// One image: a manifest, a config and a layer.
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil || len(blobs) != 3 {
		t.Errorf("%d blobs (%v), want the 3 of the new image only", len(blobs), err)
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(other, idx); err == nil || !strings.Contains(err.Error(), "no oci-layout") {
		t.Errorf("write over a directory of other files: %v, want refused", err)
	}
	if _, err := os.Stat(filepath.Join(other, "notes")); err != nil {
		t.Errorf("the refused directory lost its file: %v", err)
	}
	if _, err := ReadLayout(t.TempDir()); err == nil || !strings.Contains(err.Error(), "make images") {
		t.Errorf("read of an empty directory: %v, want one saying what writes the layout", err)
	}
}

// TestPush pushes an index to a registry under the agent's repository and
// tag, and reads the same index back.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	idx := smallIndex(t, "agent", "v1.2.3")
	ref, err := AgentReference(u.Host+"/team", idx)
	if err != nil {
		t.Fatal(err)
	}
	if want := u.Host + "/team/peerlink-agent:v1.2.3"; ref.String() != want {
		t.Errorf("reference %s, want %s", ref, want)
	}
	if err := Push(context.Background(), ref, idx); err != nil {
		t.Fatal(err)
	}
	got, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if d, err := got.Digest(); err != nil || d != want {
		t.Errorf("pushed index %s (%v), want %s", d, err, want)
	}

	for _, bad := range []string{"", "Upper/Case", "with space", "host/Path"} {
		if _, err := AgentReference(bad, idx); err == nil || !strings.Contains(err.Error(), "registry") {
			t.Errorf("registry %q: %v, want refused", bad, err)
		}
	}
	if _, err := AgentReference("example.com", smallIndex(t, "agent", "")); err == nil || !strings.Contains(err.Error(), AnnotationVersion) {
		t.Errorf("an index without a version: %v, want refused", err)
	}
}
