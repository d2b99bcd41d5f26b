package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/peerlink/peerlink/internal/testenv/proc"
)

// AgentImage is the image name the install bundle and the gateway templates
// use for every peerlink pod.
const AgentImage = "ghcr.io/peerlink/peerlink-agent:latest"

// Mirrored are the registry hosts whose images the lab registry serves: the
// product's own and the one of the sandbox image.
func Mirrored() []string { return []string{"ghcr.io", "registry.k8s.io"} }

// EchoImage is the name of the echo server image in the lab registry.
func EchoImage(registry string) string { return registry + "/lab/echo:latest" }

// Binary is a program the lab builds from this repository.
type Binary struct {
	// Package is the Go package path relative to the repository root.
	Package string
	// Image is the image name the binary is published under; a name on a
	// mirrored host is pushed to the same path in the lab registry. Empty
	// means the binary runs on the host and has no image.
	Image func(registry string) string
}

// Binaries are the programs the lab builds; go build names each after the
// last element of its package path.
func Binaries(pauseImage string) []Binary {
	mirror := func(image string) func(string) string {
		return func(string) string { return image }
	}
	return []Binary{
		{Package: "./cmd/peerlink-agent", Image: mirror(AgentImage)},
		{Package: "./lab/echo", Image: EchoImage},
		{Package: "./lab/pause", Image: mirror(pauseImage)},
		{Package: "./lab/registry"},
		{Package: "./cmd/peerlink"},
	}
}

// Build compiles the binaries statically for this machine into out.
func Build(ctx context.Context, repo, out string, bins []Binary) error {
	pkgs := make([]string, len(bins))
	for i, b := range bins {
		pkgs[i] = b.Package
	}
	return proc.Build(ctx, repo, out, pkgs...)
}

// Publish makes an image of each binary that has one (the binary alone, as
// its entrypoint) and pushes it to the registry at host:port.
func Publish(ctx context.Context, registry, binDir string, bins []Binary) error {
	opts := pushOptions(ctx)
	for _, b := range bins {
		if b.Image == nil {
			continue
		}
		img, err := imageOf(filepath.Join(binDir, filepath.Base(b.Package)))
		if err != nil {
			return err
		}
		if err := push(LocalName(b.Image(registry), registry), img, opts); err != nil {
			return err
		}
	}
	return nil
}

func push(image string, img v1.Image, opts []remote.Option) error {
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		return fmt.Errorf("image %s: %w", image, err)
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		return fmt.Errorf("push %s: %w", image, err)
	}
	return nil
}

// pushOptions reach the lab registry: local and plain HTTP, so no proxy and
// no credentials.
func pushOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(&http.Transport{Proxy: nil})}
}

// LocalName is where the lab registry holds an image: the same repository
// path on the registry's own host.
func LocalName(image, registry string) string {
	host, path, ok := strings.Cut(image, "/")
	if !ok || host == registry {
		return image
	}
	return registry + "/" + path
}

// imageOf builds a one-layer image for this machine holding the binary at
// /<name>, which is also its entrypoint.
func imageOf(file string) (v1.Image, error) {
	return imageOfFiles(spec{entrypoint: file})
}

// spec describes an image of one program.
type spec struct {
	// entrypoint is the program's file on this machine; the image holds it
	// at /<name> and runs it.
	entrypoint string
	// hostFiles are more files of this machine, held at their own paths;
	// a symbolic link is kept as a link.
	hostFiles []string
	// user runs the program (uid:gid); empty means root.
	user string
	// env is the program's environment, NAME=value.
	env []string
}

// imageOfFiles builds the one-layer image s describes.
func imageOfFiles(s spec) (v1.Image, error) {
	fail := func(err error) (v1.Image, error) { return nil, fmt.Errorf("image of %s: %w", s.entrypoint, err) }
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name, file string) error {
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
	base := filepath.Base(s.entrypoint)
	if err := add(base, s.entrypoint); err != nil {
		return fail(err)
	}
	for _, f := range s.hostFiles {
		if err := add(f, f); err != nil {
			return fail(err)
		}
	}
	if err := tw.Close(); err != nil {
		return fail(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching)
	if err != nil {
		return fail(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fail(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fail(err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Config.Entrypoint = []string{"/" + base}
	cf.Config.User = s.user
	cf.Config.Env = s.env
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return fail(err)
	}
	return img, nil
}
