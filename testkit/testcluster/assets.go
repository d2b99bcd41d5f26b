package testcluster

import (
	"os"
	"path/filepath"

	"github.com/peerlink/peerlink/testkit/testenv"
)

// assetsEnv names the directory of the binaries, as for envtest.
const assetsEnv = "KUBEBUILDER_ASSETS"

// assetsDir returns the directory of the Kubernetes binaries: KUBEBUILDER_ASSETS
// when set (a relative path is taken from the repository root, since go test
// runs each package in its own directory), else bin/k8s/current under the
// repository root.
func assetsDir() (string, error) {
	dir := os.Getenv(assetsEnv)
	if dir != "" && filepath.IsAbs(dir) {
		return dir, nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	if dir != "" {
		return filepath.Join(root, dir), nil
	}
	return filepath.Join(root, "bin", "k8s", "current"), nil
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
