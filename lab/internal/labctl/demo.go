package labctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/lab/internal/echoapi"
)

// Demo peers the first two clusters of the lab with `peerlink network
// connect`, waits until both sides are Connected, and sends a request from
// an echo pod of each cluster to one of the other through its remapped
// address, printing what both ends saw.
func (l *Lab) Demo(ctx context.Context, out io.Writer) error {
	if len(l.Clusters) < 2 {
		return errors.New("the demo needs two clusters")
	}
	p := NewProgress(out)
	a, b := l.Clusters[0], l.Clusters[1]
	p.Logf("peerlink %s", strings.Join(l.ConnectArgs(a, b), " "))
	cliOut, err := l.Connect(ctx, a, b)
	if len(cliOut) > 0 {
		fmt.Fprintf(out, "%s\n", strings.TrimRight(string(cliOut), "\n"))
	}
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := l.WaitConnected(waitCtx, a, b); err != nil {
		return err
	}
	p.Logf("Connected on both sides")
	for _, dir := range [][2]*cluster.Cluster{{a, b}, {b, a}} {
		real, remapped, err := l.PodCIDRView(ctx, dir[0], dir[1])
		if err != nil {
			return err
		}
		p.Logf("%s reaches the pods of %s (%s) at %s", dir[0].Name, dir[1].Name, real, remapped)
	}
	for _, dir := range [][2]*cluster.Cluster{{a, b}, {b, a}} {
		got, from, err := l.reachEventually(ctx, dir[0], dir[1])
		if err != nil {
			return err
		}
		p.Logf("%s", describe(dir[0], from, dir[1], got))
	}
	return nil
}

// reachEventually retries Reach from the first echo pod of src to the first
// of dst for a while: routes and NAT rules on every hop settle just after
// Connected.
func (l *Lab) reachEventually(ctx context.Context, src, dst *cluster.Cluster) (echoapi.Got, corev1.Pod, error) {
	fromPods, toPods, err := l.echoPodsOf(ctx, src, dst)
	if err != nil {
		return echoapi.Got{}, corev1.Pod{}, err
	}
	// A destination whose address differs from the source's own shows
	// that the answer comes from the other cluster.
	from, to := fromPods[0], toPods[0]
	for _, p := range toPods {
		if p.Status.PodIP != from.Status.PodIP {
			to = p
			break
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := l.Reach(ctx, src, from, dst, to)
		if err == nil {
			return got, from, nil
		}
		if time.Now().After(deadline) {
			return got, from, fmt.Errorf("from %s to %s: %w", src.Name, dst.Name, err)
		}
		select {
		case <-ctx.Done():
			return got, from, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// describe tells what both ends of a request saw: the caller used the
// callee's remapped address, the callee answered with its real one and saw
// the caller under the caller's remapped address.
func describe(src *cluster.Cluster, from corev1.Pod, dst *cluster.Cluster, got echoapi.Got) string {
	return fmt.Sprintf("%s pod %s (%s) -> %s: answered by %s pod %s (real IP %s), which saw the caller as %s",
		src.Name, from.Name, from.Status.PodIP, got.URL, dst.Name, got.Reply.Pod, got.Reply.PodIP, got.Reply.Client)
}
