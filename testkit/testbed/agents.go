package testbed

import (
	"context"
	"path"
	"path/filepath"

	"github.com/peerlink/peerlink/testkit/testenv"
	"github.com/peerlink/peerlink/testkit/testenv/netns"
	"github.com/peerlink/peerlink/testkit/testenv/proc"
)

// BuildAgent builds peerlink-agent into dir and returns its path.
func BuildAgent(ctx context.Context, dir string) (string, error) {
	return build(ctx, dir, "./cmd/peerlink-agent")
}

// BuildWGBare builds the bare wireguard-go runner (package wgbare) into dir
// and returns its path.
func BuildWGBare(ctx context.Context, dir string) (string, error) {
	return build(ctx, dir, "./testkit/testbed/wgbare")
}

// build builds the command pkg of the repository into dir.
func build(ctx context.Context, dir, pkg string) (string, error) {
	repo, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	if err := proc.Build(ctx, repo, dir, pkg); err != nil {
		return "", err
	}
	return filepath.Join(dir, path.Base(pkg)), nil
}

// start runs bin with args in ns as a pod's container runs, with a
// /run/wireguard of its own, its output appended to logPath. It ends with
// the test.
func start(ns *netns.NS, logPath, bin string, args ...string) (*proc.Process, error) {
	return proc.Start(proc.Spec{
		Name:  filepath.Base(bin) + " in " + ns.Name,
		Argv:  append([]string{bin}, args...),
		Netns: ns.Name,
		Pod:   true,
		Log:   logPath,
	})
}
