package testenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// Helm returns the Helm CLI that hack/components.sh builds from source into
// bin/helm/current of the repository at repo, or an error saying how to
// build it when it is not there.
func Helm(repo string) (string, error) {
	bin := filepath.Join(repo, "bin", "helm", "current", "helm")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no Helm CLI (%w): build it with hack/components.sh helm", err)
	}
	return bin, nil
}
