package images

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/peerlink/peerlink/internal/image"
)

// Component is a program of another project the lab runs in its clusters,
// built from its upstream sources into the repository's bin/ by
// hack/components.sh, or taken from this machine's Debian packages.
type Component struct {
	// File is the built program, the image's entrypoint. Empty makes an
	// image of host programs only (see Entrypoint).
	File string
	// Entrypoint, for an image without File, is what it runs: a host
	// program by its path; none leaves the pod's command to say it.
	Entrypoint []string
	// Links are symbolic links the image holds, path to target.
	Links map[string]string
	// Image is the name it is published under in the lab registry.
	Image string
	// HostPrograms are programs of this machine the component runs, such
	// as iptables: the image holds each with its symbolic links, the
	// shared libraries it loads and the directories of plugins it opens.
	HostPrograms []string
	// PluginDirs are directories of shared objects the host programs open
	// at run time, held whole.
	PluginDirs []string
	// User runs the program (uid:gid), for manifests that demand a user
	// other than root; empty means root.
	User string
}

// PublishComponents makes an image of each component and pushes it to the
// registry.
func PublishComponents(ctx context.Context, cs []Component) error {
	opts := pushOptions(ctx)
	for _, c := range cs {
		files, err := hostClosure(c.HostPrograms, c.PluginDirs)
		if err != nil {
			return fmt.Errorf("image %s: %w", c.Image, err)
		}
		img, err := image.Of(image.Program{
			File:       c.File,
			Entrypoint: c.Entrypoint,
			Links:      c.Links,
			Platform:   image.HostPlatform(),
			HostFiles:  files,
			User:       c.User,
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		})
		if err != nil {
			return err
		}
		if err := push(c.Image, img, opts); err != nil {
			return err
		}
	}
	return nil
}

// hostClosure lists the files that host programs need on another root:
// each program and the links leading to it, the shared libraries ldd
// names (and the links to them), and every file below the plugin dirs.
func hostClosure(programs, pluginDirs []string) ([]string, error) {
	var files []string
	addChain := func(path string) error {
		// Follow the links one at a time, keeping each, so that the
		// program keeps the name it is called by (iptables is a link to
		// xtables-nft-multi, which acts on the name).
		for range 16 {
			files = append(files, path)
			fi, err := os.Lstat(path)
			if err != nil {
				return err
			}
			if fi.Mode()&os.ModeSymlink == 0 {
				return nil
			}
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(path), target)
			}
			path = target
		}
		return fmt.Errorf("%s: too many links", path)
	}
	var objects []string
	for _, p := range programs {
		if err := addChain(p); err != nil {
			return nil, err
		}
		objects = append(objects, p)
	}
	for _, d := range pluginDirs {
		err := filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			objects = append(objects, path)
			return addChain(path)
		})
		if err != nil {
			return nil, err
		}
	}
	for _, o := range objects {
		libs, err := sharedLibraries(o)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			if err := addChain(l); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// sharedLibraries returns the files of the shared libraries ldd says file
// loads, the dynamic loader included.
func sharedLibraries(file string) ([]string, error) {
	out, err := exec.Command("ldd", file).Output()
	if err != nil {
		// ldd fails on a static program: it loads nothing.
		return nil, nil
	}
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
			}
		}
	}
	return libs, sc.Err()
}
