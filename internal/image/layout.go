package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// WriteLayout writes the index and its images as an OCI image layout in
// dir: index.json is the index itself. A layout already in dir is replaced
// whole, so that no blob of an older build stays; a directory holding
// anything else is refused.
func WriteLayout(dir string, idx v1.ImageIndex) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("image layout %s: %w", dir, err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("image layout %s: the directory holds files but no oci-layout: not replacing it", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("image layout %s: %w", dir, err)
		}
	}
	if _, err := layout.Write(dir, idx); err != nil {
		return fmt.Errorf("image layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout reads the index WriteLayout wrote in dir.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image layout %s: %w (make images writes it)", dir, err)
	}
	return idx, nil
}

// AgentReference is where the agent index goes in registry (host[:port]
// and an optional path): the repository peerlink-agent under it, tagged
// with the version the index is annotated with.
func AgentReference(registry string, idx v1.ImageIndex) (name.Tag, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return name.Tag{}, err
	}
	v := m.Annotations[AnnotationVersion]
	if v == "" {
		return name.Tag{}, fmt.Errorf("the index names no version (annotation %s)", AnnotationVersion)
	}
	if registry == "" {
		return name.Tag{}, errors.New("registry: empty, want host[:port][/path]")
	}
	tag, err := name.NewTag(registry + "/" + AgentName + ":" + v)
	if err != nil {
		return name.Tag{}, fmt.Errorf("registry %q: %w (want host[:port][/path])", registry, err)
	}
	return tag, nil
}

// Push uploads the index, its images and their blobs to ref; blobs the
// registry holds already are not sent again.
func Push(ctx context.Context, ref name.Reference, idx v1.ImageIndex, opts ...remote.Option) error {
	if err := remote.WriteIndex(ref, idx, append(opts, remote.WithContext(ctx))...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
