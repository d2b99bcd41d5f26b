package labctl

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/peerlink/peerlink/internal/gitcmd"
	"github.com/peerlink/peerlink/internal/version"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/images"
)

// PreviousReleaseFile, in the repository, names the release an upgrade is
// tested from: its first line that is neither empty nor a comment is a
// commit of the repository.
const PreviousReleaseFile = "hack/previous-release"

// PreviousReleaseEnv, when set, names that commit instead of
// PreviousReleaseFile.
const PreviousReleaseEnv = "PEERLINK_PREVIOUS_RELEASE"

// Release is a release of peerlink other than the lab's own tree, which
// the lab installs first so that the upgrade to its own tree, and the
// downgrade back, can be tried (Options.Previous).
type Release struct {
	// Tree is the root of the release's files: its bundle, chart and
	// sources.
	Tree string
	// Version names the release: the tag its agent image is published
	// under beside the tree's own (images.AgentImageTagged), and its stamp.
	Version string
	// Commit is the full hash of its commit.
	Commit string
}

// PreviousRelease returns the commit the repository names in
// PreviousReleaseFile, or PreviousReleaseEnv when it is set.
func PreviousRelease(repo string) (string, error) {
	if c := os.Getenv(PreviousReleaseEnv); c != "" {
		return c, nil
	}
	path := filepath.Join(repo, PreviousReleaseFile)
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("previous release: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("previous release: %s: %w", path, err)
	}
	return "", fmt.Errorf("previous release: %s names no commit", path)
}

// ExtractRelease writes the files of commit of the repository into dir,
// which must exist, as git archive gives them, and returns the release,
// named after the commit's short hash.
func ExtractRelease(ctx context.Context, repo, commit, dir string) (Release, error) {
	git := func(args ...string) (string, error) {
		out, err := gitcmd.Output(ctx, repo, args...)
		if err != nil {
			return "", fmt.Errorf("release %s: %w", commit, err)
		}
		return out, nil
	}
	full, err := git("rev-parse", "--verify", commit+"^{commit}")
	if err != nil {
		return Release{}, err
	}
	short, err := git("rev-parse", "--short=7", full)
	if err != nil {
		return Release{}, err
	}
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", full)
	archive.Dir = repo
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	if untar.Stdin, err = archive.StdoutPipe(); err != nil {
		return Release{}, err
	}
	var stderr strings.Builder
	archive.Stderr, untar.Stderr = &stderr, &stderr
	if err := untar.Start(); err != nil {
		return Release{}, fmt.Errorf("release %s: tar: %w", commit, err)
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return Release{}, fmt.Errorf("release %s: git archive: %w: %s", commit, err, strings.TrimSpace(stderr.String()))
	}
	if err := untar.Wait(); err != nil {
		return Release{}, fmt.Errorf("release %s: tar: %w: %s", commit, err, strings.TrimSpace(stderr.String()))
	}
	return Release{Tree: dir, Version: short, Commit: full}, nil
}

// source is a tree peerlink is installed from, and the tag of the agent
// image its bundle and chart are given; none leaves theirs, AgentImage.
type source struct {
	repo, tag string
}

// own is the lab's own tree, whose agent image is AgentImage.
func (l *Lab) own() source { return source{repo: l.State.Repo} }

// first is what Up installs: the previous release when there is one.
func (l *Lab) first() source {
	if l.previous == nil {
		return l.own()
	}
	return source{repo: l.previous.Tree, tag: l.previous.Version}
}

// publishPrevious builds the previous release's agent image and publishes
// it beside the tree's under the release's version, and writes the
// overlay of its install bundle that names that image.
func (l *Lab) publishPrevious(ctx context.Context) error {
	r := l.previous
	s := version.Info{Version: r.Version, Commit: r.Commit}
	if err := images.PublishAgent(ctx, r.Tree, l.path("previous", "bin"), l.State.Registry, images.AgentImageTagged(r.Version), s); err != nil {
		return fmt.Errorf("previous release %s: %w", r.Version, err)
	}
	dir := l.overlay(l.first())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base, err := filepath.Rel(dir, filepath.Join(r.Tree, "bundles", "install"))
	if err != nil {
		return err
	}
	k := fmt.Sprintf(`# The install bundle of release %s, with its own agent image.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: %s
  newTag: %s
`, r.Version, base, images.AgentRepository, r.Version)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return err
	}
	l.progress.Logf("registry on %s serves %s too: the previous release, %s", l.State.Registry, images.AgentImageTagged(r.Version), r.Commit)
	return nil
}

// overlay is the directory kubectl apply -k takes for src: its bundle as
// it is, or an overlay of it naming its agent image.
func (l *Lab) overlay(src source) string {
	if src.tag == "" {
		return filepath.Join(src.repo, "bundles", "install")
	}
	return l.path("previous", "install")
}

// Upgrade installs the lab's own tree over the previous release running in
// n, the way how installed it, as docs/install.md tells: kubectl apply -k
// of the bundle, or the chart's CRDs applied server-side, taken over from
// Helm, and then helm upgrade. It
// returns once the new controller and fabric agents run (WaitInstalled);
// the gateways roll out after.
func (l *Lab) Upgrade(ctx context.Context, n *cluster.Cluster, how Installer) error {
	return l.reinstall(ctx, n, how, l.own())
}

// Downgrade installs the previous release again over the lab's own tree,
// the way Upgrade installed it.
func (l *Lab) Downgrade(ctx context.Context, n *cluster.Cluster, how Installer) error {
	if l.previous == nil {
		return fmt.Errorf("cluster %s: no previous release to go back to (Options.Previous)", n.Name)
	}
	return l.reinstall(ctx, n, how, l.first())
}

// reinstall installs src over what runs in n and waits for it.
func (l *Lab) reinstall(ctx context.Context, n *cluster.Cluster, how Installer, src source) error {
	if how == Helm {
		crds := filepath.Join(src.repo, "bundles", "helm", "peerlink", "crds")
		// Helm created the CRDs and owns their fields: taking them over
		// is the point.
		if _, err := l.Kubectl(ctx, n, "apply", "--server-side", "--force-conflicts", "-f", crds); err != nil {
			return err
		}
		// Given no values, helm upgrade keeps the last release's, the
		// previous release's image tag among them: the chart's defaults
		// are the point.
		args := []string{"upgrade", "peerlink", src.chart(), "--namespace", PeerlinkNamespace, "--reset-values"}
		if src.tag != "" {
			args = append(args, "--set", "images.agent.tag="+src.tag)
		}
		if _, err := l.Helm(ctx, n, args...); err != nil {
			return err
		}
		l.progress.Logf("%s: helm %s", n.Name, strings.Join(args, " "))
	} else {
		if _, err := l.Kubectl(ctx, n, "apply", "-k", l.overlay(src)); err != nil {
			return err
		}
		l.progress.Logf("%s: kubectl apply -k %s", n.Name, l.overlay(src))
	}
	return l.WaitInstalled(ctx, n)
}

// chart is the Helm chart of src.
func (src source) chart() string { return filepath.Join(src.repo, "bundles", "helm", "peerlink") }
