package labctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// diagnosticKinds are what Diagnostics lists of every cluster, with their
// status: peerlink's objects, the Multi-Cluster Services ones, and the pods.
var diagnosticKinds = []string{
	"configurations.networking.liqo.io", "gatewayservers.networking.liqo.io", "gatewayclients.networking.liqo.io",
	"wggatewayservers.networking.liqo.io", "wggatewayclients.networking.liqo.io", "publickeies.networking.liqo.io",
	"connections.networking.liqo.io", "serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io",
	"pods", "leases.coordination.k8s.io",
}

// fluxKinds are what Diagnostics lists too on a lab with Flux: its sources
// and Kustomizations, whose conditions say why a sync stalls.
var fluxKinds = []string{"gitrepositories.source.toolkit.fluxcd.io", "kustomizations.kustomize.toolkit.fluxcd.io"}

// kinds returns what Diagnostics lists of every cluster of l.
func (l *Lab) kinds() string {
	kinds := diagnosticKinds
	if l.flux {
		kinds = append(slices.Clip(kinds), fluxKinds...)
	}
	return strings.Join(kinds, ",")
}

// Diagnostics keeps what tells why a test on the lab failed: it copies
// every log file of the lab (control-plane and node components, every
// container of every pod) under dir, keeping their place in the lab's
// tree, and writes per cluster the state of peerlink's objects and of the
// pods (state-<cluster>.yaml) and the cluster's events
// (events-<cluster>.txt). To out it writes the state and events, the
// last tail lines of every log of a peerlink pod (controller, fabric,
// gateways), the last tail/10 lines of every other log, and, last, one
// table per cluster of those objects, where a reader of the end of a
// failed run's output finds it. It goes on past errors and returns them
// all.
func (l *Lab) Diagnostics(ctx context.Context, dir string, out io.Writer, tail int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, c := range l.Clusters {
		state, err := l.Kubectl(ctx, c, "get", l.kinds(), "-A", "-o", "yaml")
		if err != nil {
			errs = append(errs, err)
		}
		events, err := l.Kubectl(ctx, c, "get", "events", "-A", "--sort-by=.lastTimestamp")
		if err != nil {
			errs = append(errs, err)
		}
		for name, data := range map[string][]byte{"state-" + c.Name + ".yaml": state, "events-" + c.Name + ".txt": events} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				errs = append(errs, err)
			}
			fmt.Fprintf(out, "===== %s\n%s\n", name, data)
		}
	}
	err := filepath.WalkDir(l.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			// A pod's log directory may go while the walk runs.
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		rel, err := filepath.Rel(l.Dir, path)
		if err != nil {
			return err
		}
		if err := copyFile(path, filepath.Join(dir, rel)); err != nil {
			errs = append(errs, err)
			return nil
		}
		n := tail / 10
		if peerlinkLog(rel) {
			n = tail
		}
		lines, err := lastLines(path, n)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		fmt.Fprintf(out, "===== %s (last %d lines)\n%s\n", rel, n, strings.Join(lines, "\n"))
		return nil
	})
	errs = append(errs, err)
	for _, c := range l.Clusters {
		table, err := l.Kubectl(ctx, c, "get", l.kinds(), "-A")
		if err != nil {
			errs = append(errs, err)
		}
		fmt.Fprintf(out, "===== %s\n%s\n", c.Name, table)
	}
	fmt.Fprintf(out, "===== the whole logs are in %s\n", dir)
	return errors.Join(errs...)
}

// peerlinkLog reports whether the log at rel, in the lab's tree, is one of
// a peerlink pod: the controller's and the fabric's (namespace peerlink)
// or a gateway's (a tenant namespace).
func peerlinkLog(rel string) bool {
	_, pod, ok := strings.Cut(filepath.ToSlash(rel), "/pod-logs/")
	return ok && (strings.HasPrefix(pod, "peerlink_") || strings.HasPrefix(pod, "liqo-tenant-"))
}

// copyFile copies the file at from to to, making to's directory.
func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return dst.Close()
}

// lastLines returns the last n lines of the file at path.
func lastLines(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if n <= 0 {
		return nil, nil
	}
	ring := make([]string, n)
	seen := 0
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		ring[seen%n] = s.Text()
		seen++
	}
	if seen <= n {
		return ring[:seen], s.Err()
	}
	start := seen % n
	return append(ring[start:], ring[:start]...), s.Err()
}
