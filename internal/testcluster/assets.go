package testcluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	// rootModule is the module whose directory holds bin/.
	rootModule = "github.com/peerlink/peerlink"
	// assetsEnv names the directory of the binaries, as for envtest.
	assetsEnv = "KUBEBUILDER_ASSETS"
)

// assetsDir returns the directory of the Kubernetes binaries: KUBEBUILDER_ASSETS
// when set (a relative path is taken from the repository root, since go test
// runs each package in its own directory), else bin/k8s/current under the
// repository root.
func assetsDir() (string, error) {
	dir := os.Getenv(assetsEnv)
	if dir != "" && filepath.IsAbs(dir) {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	root, err := repoRoot(wd)
	if err != nil {
		return "", err
	}
	if dir != "" {
		return filepath.Join(root, dir), nil
	}
	return filepath.Join(root, "bin", "k8s", "current"), nil
}

// repoRoot walks up from dir to the directory whose go.mod declares the root
// module.
func repoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("absolute path: %w", err)
	}
	for d := dir; ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && modulePath(data) == rootModule {
			return d, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("read go.mod: %w", err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod of module %s in %s or above", rootModule, dir)
		}
		d = parent
	}
}

// modulePath returns the path of the module directive of a go.mod file.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			if p, err := strconv.Unquote(fields[1]); err == nil {
				return p
			}
			return fields[1]
		}
	}
	return ""
}

// missingBinaries returns the names among bins that are not executable files
// in dir.
func missingBinaries(dir string, bins ...string) []string {
	var missing []string
	for _, b := range bins {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing
}
