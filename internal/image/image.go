package image

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Program describes an image of one program: a single layer holding the
// program and the host files it needs, the program as entrypoint.
type Program struct {
	// File is the program on this machine; the image holds it at
	// /<base name> and runs it. Empty makes an image of HostFiles and
	// Links only, with no entrypoint unless Entrypoint names one.
	File string
	// Entrypoint, when set, is run instead of File: a program among
	// HostFiles, for an image made of host programs.
	Entrypoint []string
	// Links are symbolic links the image holds, path to target, such as
	// the applet names of a multi-call program.
	Links map[string]string
	// Platform is the OS and architecture File is built for.
	Platform v1.Platform
	// HostFiles are more files of this machine, held at their own paths;
	// a symbolic link is kept as a link.
	HostFiles []string
	// User runs the program (uid:gid); empty means root.
	User string
	// Env is the program's environment, NAME=value.
	Env []string
	// Labels are the image's labels.
	Labels map[string]string
}

// Of builds the OCI image p describes. The layer's files carry no time, so
// the same files make the same image.
func Of(p Program) (v1.Image, error) {
	what := cmp.Or(p.File, strings.Join(p.Entrypoint, " "), "host files")
	fail := func(err error) (v1.Image, error) { return nil, fmt.Errorf("image of %s: %w", what, err) }
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entrypoint := p.Entrypoint
	if p.File != "" {
		base := filepath.Base(p.File)
		if err := addFile(tw, base, p.File); err != nil {
			return fail(err)
		}
		if entrypoint == nil {
			entrypoint = []string{"/" + base}
		}
	}
	for _, f := range p.HostFiles {
		if err := addFile(tw, f, f); err != nil {
			return fail(err)
		}
	}
	// Sorted, so that the same links make the same layer.
	for _, name := range slices.Sorted(maps.Keys(p.Links)) {
		hdr := &tar.Header{Name: strings.TrimPrefix(name, "/"), Typeflag: tar.TypeSymlink, Linkname: p.Links[name], Mode: 0o777, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return fail(err)
		}
	}
	if err := tw.Close(); err != nil {
		return fail(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return fail(err)
	}
	ociEmpty := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(ociEmpty, layer)
	if err != nil {
		return fail(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fail(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.Platform.OS, p.Platform.Architecture, p.Platform.Variant
	cf.Config.Entrypoint = entrypoint
	cf.Config.User = p.User
	cf.Config.Env = p.Env
	cf.Config.Labels = p.Labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return fail(err)
	}
	return img, nil
}

// addFile writes file of this machine into tw as name.
func addFile(tw *tar.Writer, name, file string) error {
	fi, err := os.Lstat(file)
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: strings.TrimPrefix(name, "/"), Mode: int64(fi.Mode().Perm()), ModTime: time.Unix(0, 0)}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(file)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		return tw.WriteHeader(hdr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}
