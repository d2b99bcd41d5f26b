package images

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/peerlink/peerlink/internal/image"
	"github.com/peerlink/peerlink/internal/version"
	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// AgentImage is the image name the install bundle and the gateway templates
// use for every peerlink pod.
const AgentImage = AgentRepository + ":latest"

// AgentRepository is AgentImage without its tag.
const AgentRepository = "ghcr.io/peerlink/peerlink-agent"

// AgentImageTagged is the agent image of another release than the tree's,
// published beside AgentImage under its own tag.
func AgentImageTagged(tag string) string { return AgentRepository + ":" + tag }

// Mirrored are the registry hosts whose images the lab registry serves: the
// product's own, the one of the sandbox image and Docker Hub's, for the tool
// images (Tools).
func Mirrored() []string { return []string{"ghcr.io", "registry.k8s.io", "docker.io"} }

// EchoImage is the name of the echo server image in the lab registry.
func EchoImage(registry string) string { return registry + "/lab/echo:latest" }

// Binary is a program the lab builds from this repository for this
// machine; the CLI and the agent are not among them (BuildCLI and
// PublishAgent build them, with the version stamped in).
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
	mirror := func(ref string) func(string) string {
		return func(string) string { return ref }
	}
	return []Binary{
		{Package: "./lab/echo", Image: EchoImage},
		{Package: "./lab/pause", Image: mirror(pauseImage)},
		{Package: "./lab/registry"},
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
		img, err := image.Of(image.Program{File: filepath.Join(binDir, filepath.Base(b.Package)), Platform: image.HostPlatform()})
		if err != nil {
			return err
		}
		if err := push(LocalName(b.Image(registry), registry), img, opts); err != nil {
			return err
		}
	}
	return nil
}

// cliPackage is the Go package of the peerlink CLI.
const cliPackage = "./cmd/peerlink"

// BuildCLI compiles the peerlink CLI of the tree at repo for this machine
// into binDir, stamped with s as the agent image is, so that the CLI and the
// controller of the lab report one version.
func BuildCLI(ctx context.Context, repo, binDir string, s version.Info) error {
	return image.Compile(ctx, repo, cliPackage, filepath.Join(binDir, filepath.Base(cliPackage)), image.HostPlatform(), s)
}

// PublishAgent builds the agent image of the tree at repo as make images
// does, for this machine only and with the stamp s, compiling into work,
// and pushes it to the registry at host:port as ref, AgentImage or
// AgentImageTagged.
func PublishAgent(ctx context.Context, repo, work, registry, ref string, s version.Info) error {
	idx, err := image.Agent{Repo: repo, Work: work, Platforms: []v1.Platform{image.HostPlatform()}, Stamp: s}.Build(ctx)
	if err != nil {
		return err
	}
	local := LocalName(ref, registry)
	r, err := name.ParseReference(local, name.Insecure)
	if err != nil {
		return fmt.Errorf("image %s: %w", local, err)
	}
	return image.Push(ctx, r, idx, pushOptions(ctx)...)
}

func push(ref string, img v1.Image, opts []remote.Option) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
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
func LocalName(ref, registry string) string {
	host, path, ok := strings.Cut(ref, "/")
	if !ok || host == registry {
		return ref
	}
	return registry + "/" + path
}
