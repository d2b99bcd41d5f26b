package kbuild

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Build runs kustomize on dir, a directory holding a kustomization.yaml, and
// returns the resulting objects in kustomize's output order.
func Build(dir string) ([]*unstructured.Unstructured, error) {
	return BuildFS(filesys.MakeFsOnDisk(), dir)
}

// BuildFS is Build on the given file system, so callers can build bundles
// held in memory.
func BuildFS(fs filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	objs := make([]*unstructured.Unstructured, 0, resMap.Size())
	for _, r := range resMap.Resources() {
		// A JSON round trip gives the value types (int64, float64) the
		// apimachinery helpers expect; kustomize's own maps hold plain ints.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: object %s: %w", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("kustomize build %s: object %s: %w", dir, r.CurId(), err)
		}
		objs = append(objs, u)
	}
	return objs, nil
}
