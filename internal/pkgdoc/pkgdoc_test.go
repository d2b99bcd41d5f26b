package pkgdoc

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEveryPackageHasOneDocComment(t *testing.T) {
	root := filepath.Join("..", "..")
	dirs := map[string][]string{} // directory -> non-test Go files
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "hack") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("found %d packages, the walk is broken", len(dirs))
	}
	for dir, files := range dirs {
		var documented []string
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, src, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if file.Doc != nil && strings.TrimSpace(file.Doc.Text()) != "" {
				documented = append(documented, filepath.Base(f))
			}
		}
		rel, _ := filepath.Rel(root, dir)
		switch {
		case len(documented) == 0:
			t.Errorf("package %s has no package doc comment: add a doc.go", rel)
		case len(documented) > 1:
			t.Errorf("package %s has package doc comments in %v: keep one", rel, documented)
		case documented[0] != "doc.go" && documented[0] != "main.go":
			t.Errorf("package %s documents itself in %s: move the comment to doc.go", rel, documented[0])
		}
	}
}
