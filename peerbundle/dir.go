package peerbundle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/rangepolicy"
	"github.com/peerlink/peerlink/manifests"
)

// Init writes the bundle of a peering into dir: kustomization.yaml, the
// tenant namespace and this side's gateway. A file already there with the
// same content is left alone, one with other content is replaced only with
// force, and otherwise nothing at all is written (a *ConflictError). An existing
// kustomization.yaml is kept, with the files of the bundle added to its
// resources when missing. Each file written or left is reported to out.
func Init(out io.Writer, dir string, gateway runtime.Object, force bool) error {
	files, err := InitBundle(gateway)
	if err != nil {
		return err
	}
	if files, err = keepKustomization(dir, files); err != nil {
		return err
	}
	return writeBundleFiles(out, dir, files, force)
}

// Add adds the objects of file, what the peer's bundle export wrote, to the
// bundle in dir, after checking them with AddToBundle under policy. The
// file is read up to maxPeerFile; nothing is written when anything is
// wrong, and the files are replaced all together. What was written and the
// notes of AddToBundle are reported to out.
func Add(out io.Writer, dir, file string, policy rangepolicy.Policy) error {
	data, err := readLimited(file, maxPeerFile)
	if err != nil {
		return err
	}
	received, err := manifests.ParseManifests(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if len(received) == 0 {
		return fmt.Errorf("%s: no objects", file)
	}
	kustomization, files, err := readBundle(dir)
	if err != nil {
		return err
	}
	res, err := AddToBundle(kustomization, files, received, policy)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	written := append(slices.Clone(res.Files), File{Name: KustomizationFile, Data: res.Kustomization})
	if err := replaceFiles(dir, written); err != nil {
		return err
	}
	for _, f := range res.Files {
		fmt.Fprintf(out, "INFO   %s written\n", filepath.Join(dir, f.Name))
	}
	for _, n := range res.Notes {
		fmt.Fprintf(out, "INFO   %s\n", n)
	}
	for _, u := range received {
		if u.GetKind() != manifests.KindConfiguration || !manifests.IsPeeringKind(u) {
			continue
		}
		if obj, _, err := manifests.DecodeStrict(u); err == nil {
			for _, p := range PeerRangePlacements(obj.(*netv1beta1.Configuration), policy) {
				fmt.Fprintf(out, "INFO   peer range %s\n", p)
			}
		}
	}
	return nil
}

// keepKustomization replaces the new kustomization.yaml among files by the
// one dir already has, with the missing files added to its resources: what
// bundle add listed there, and the user's own changes, stay.
func keepKustomization(dir string, files []File) ([]File, error) {
	path := filepath.Join(dir, KustomizationFile)
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return files, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var names []string
	for _, f := range files {
		if f.Name != KustomizationFile {
			names = append(names, f.Name)
		}
	}
	merged, err := AddResources(old, names...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	out := make([]File, 0, len(files))
	for _, f := range files {
		if f.Name == KustomizationFile {
			f.Data = merged
		}
		out = append(out, f)
	}
	return out, nil
}

// ConflictError is the refusal to replace files of a bundle that hold
// something else; the caller says how to force it.
type ConflictError struct {
	Dir   string
	Files []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s already holds a different %s", e.Dir, strings.Join(e.Files, ", "))
}

// writeBundleFiles writes files into dir. A file already there with the
// same content is left alone; with other content it is only replaced with
// force, and otherwise nothing at all is written.
func writeBundleFiles(out io.Writer, dir string, files []File, force bool) error {
	var conflicts []string
	for _, f := range files {
		old, err := os.ReadFile(filepath.Join(dir, f.Name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("read %s: %w", filepath.Join(dir, f.Name), err)
		case !bytes.Equal(old, f.Data):
			conflicts = append(conflicts, f.Name)
		}
	}
	if len(conflicts) > 0 && !force {
		return &ConflictError{Dir: dir, Files: conflicts}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.Data) {
			fmt.Fprintf(out, "INFO   %s unchanged\n", path)
			continue
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		fmt.Fprintf(out, "INFO   %s written\n", path)
	}
	return nil
}

// maxPeerFile bounds what bundle add reads of the file a peer sent: three
// small manifests fit in a few kilobytes.
const maxPeerFile = 1 << 20

// readLimited reads a file of at most limit bytes; a larger one is refused
// without reading it all.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes: what a peer sends is a few small manifests", path, limit)
	}
	return data, nil
}

// replaceFiles writes files into dir all or nothing: each goes to a
// temporary file beside its target first, and only when all are written are
// they renamed over their targets.
func replaceFiles(dir string, files []File) error {
	var temps []string
	clean := func() {
		for _, t := range temps {
			os.Remove(t)
		}
	}
	for _, f := range files {
		tmp, err := os.CreateTemp(dir, "."+f.Name+".*")
		if err != nil {
			clean()
			return fmt.Errorf("write %s: %w", filepath.Join(dir, f.Name), err)
		}
		temps = append(temps, tmp.Name())
		_, werr := tmp.Write(f.Data)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
			clean()
			return fmt.Errorf("write %s: %w", filepath.Join(dir, f.Name), err)
		}
	}
	for i, f := range files {
		if err := os.Rename(temps[i], filepath.Join(dir, f.Name)); err != nil {
			clean()
			return fmt.Errorf("write %s: %w", filepath.Join(dir, f.Name), err)
		}
	}
	return nil
}

// readBundle reads a bundle's kustomization.yaml and the manifest files it
// lists directly (directories and remote bases are not this bundle's own).
func readBundle(dir string) ([]byte, []ManifestFile, error) {
	kpath := filepath.Join(dir, KustomizationFile)
	kdata, err := os.ReadFile(kpath)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a bundle (run bundle init first): %w", dir, err)
	}
	var k kusttypes.Kustomization
	if err := yaml.Unmarshal(kdata, &k); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", kpath, err)
	}
	var files []ManifestFile
	for _, r := range k.Resources {
		path := filepath.Join(dir, r)
		st, err := os.Stat(path)
		if err != nil || st.IsDir() || filepath.Dir(filepath.Clean(r)) != "." {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		objs, err := manifests.ParseManifests(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		files = append(files, ManifestFile{Name: r, Objects: objs})
	}
	return kdata, files, nil
}
