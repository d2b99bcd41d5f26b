// Command images builds peerlink's agent image and pushes it, for
// `make images`, `make push` and `make build`:
//
//	images build [--version V] [--platforms linux/amd64,linux/arm64] [--dir bin/images/peerlink-agent]
//	images push --registry host[:port][/path] [--dir bin/images/peerlink-agent]
//	images ldflags [--version V]
//
// build cross-compiles the agent for each platform, with the version
// stamped in, and writes the images and their index as an OCI image
// layout. push sends that layout to the registry as
// <registry>/peerlink-agent:<version>, with the credentials of docker login
// or podman login. ldflags prints the go build flags that stamp the
// version, for the binaries make build writes. The version is --version,
// else git describe --tags --always, with -dirty when the tree has
// changes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/peerlink/peerlink/internal/image"
	"github.com/peerlink/peerlink/internal/version"
)

const defaultDir = "bin/images/" + image.AgentName

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("a command is required: build, push or ldflags")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var dir, given, platforms, registry *string
	switch args[0] {
	case "build":
		dir = fs.String("dir", defaultDir, "directory of the OCI image layout to write")
		given = fs.String("version", "", "version of the build (default: git describe --tags --always, -dirty for a changed tree)")
		var release []string
		for _, p := range image.ReleasePlatforms() {
			release = append(release, p.String())
		}
		platforms = fs.String("platforms", strings.Join(release, ","), "platforms to build for, comma-separated")
	case "push":
		dir = fs.String("dir", defaultDir, "directory of the OCI image layout to push")
		registry = fs.String("registry", "", "registry to push to: host[:port][/path]")
	case "ldflags":
		given = fs.String("version", "", "version of the build (default: git describe --tags --always, -dirty for a changed tree)")
	default:
		return fmt.Errorf("unknown command %q: want build, push or ldflags", args[0])
	}
	if err := fs.Parse(args[1:]); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", args[0], fs.Args())
	}
	switch args[0] {
	case "build":
		return build(ctx, *dir, *given, *platforms, out)
	case "push":
		return push(ctx, *dir, *registry, out)
	}
	s, err := image.GitStamp(ctx, ".", *given)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, version.LDFlags(s))
	return err
}

func build(ctx context.Context, dir, given, platforms string, out io.Writer) error {
	var ps []v1.Platform
	for _, s := range strings.Split(platforms, ",") {
		p, err := image.ParsePlatform(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--platforms: %w", err)
		}
		ps = append(ps, p)
	}
	stamp, err := image.GitStamp(ctx, ".", given)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "peerlink-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	idx, err := image.Agent{Repo: ".", Work: work, Platforms: ps, Stamp: stamp}.Build(ctx)
	if err != nil {
		return err
	}
	if err := image.WriteLayout(dir, idx); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s %s for %s: OCI image layout in %s, index %s\n", image.AgentName, stamp.Version, platforms, dir, d)
	return err
}

func push(ctx context.Context, dir, registry string, out io.Writer) error {
	if registry == "" {
		return errors.New("--registry is required: host[:port][/path]")
	}
	idx, err := image.ReadLayout(dir)
	if err != nil {
		return err
	}
	ref, err := image.AgentReference(registry, idx)
	if err != nil {
		return err
	}
	if err := image.Push(ctx, ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "pushed %s (index %s)\n", ref, d)
	return err
}
