package bundles

import (
	"embed"
	"io/fs"
)

//go:embed install
var bundles embed.FS

// Install returns the install bundle (install/ of this directory), its
// kustomization.yaml at the root, as `peerlink install` applies it.
func Install() fs.FS {
	sub, err := fs.Sub(bundles, "install")
	if err != nil {
		// The directory is embedded at build time: it is always there.
		panic(err)
	}
	return sub
}
