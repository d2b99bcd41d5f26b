package kbuild

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func TestBuildFSAppliesNamespace(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fs.WriteFile("/b/kustomization.yaml", []byte("namespace: ns1\nresources:\n- cm.yaml\n")))
	must(fs.WriteFile("/b/cm.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n")))
	objs, err := BuildFS(fs, "/b")
	must(err)
	if len(objs) != 1 || objs[0].GetNamespace() != "ns1" || objs[0].GetName() != "a" {
		t.Fatalf("got %v, want one ConfigMap a in ns1", objs)
	}
}

func TestBuildFSReportsTheDirectory(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	if err := fs.WriteFile("/b/kustomization.yaml", []byte("resources:\n- missing.yaml\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildFS(fs, "/b"); err == nil {
		t.Fatal("want an error for a missing resource")
	}
}

func TestBuildFSGivesJSONValueTypes(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	if err := fs.WriteFile("/b/kustomization.yaml", []byte("resources:\n- svc.yaml\n")); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFile("/b/svc.yaml", []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports:\n  - port: 80\n")); err != nil {
		t.Fatal(err)
	}
	objs, err := BuildFS(fs, "/b")
	if err != nil {
		t.Fatal(err)
	}
	// DeepCopy panics on values that are not JSON types, such as int.
	ports, _, _ := unstructured.NestedSlice(objs[0].DeepCopy().Object, "spec", "ports")
	if got := ports[0].(map[string]any)["port"]; got != int64(80) {
		t.Fatalf("port is %#v, want int64(80)", got)
	}
}
