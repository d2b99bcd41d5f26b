package labctl

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/api"
	"github.com/peerlink/peerlink/lab/internal/cluster"
	"github.com/peerlink/peerlink/manifests"
	"github.com/peerlink/peerlink/mcs"
)

// hop is one step of an export on its way to the peer, and when it was
// first seen.
type hop struct {
	name string
	at   time.Time
}

// hopTracer watches, on both clusters, each step a ServiceExport of b
// takes to become an import in a: the exports ConfigMap of b's controller,
// the imports ConfigMap a's gateway writes, the ServiceImport with its
// clusterset IP, and a ready imported EndpointSlice. It only watches (one
// watch per step, started before the export is created), so it adds no
// load the steps would wait on.
type hopTracer struct {
	mu   sync.Mutex
	hops []hop
	wg   sync.WaitGroup
	stop context.CancelFunc
}

// watchClient is a client of n that can watch.
func (l *Lab) watchClient(n *cluster.Cluster) (client.WithWatch, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("cluster %s kubeconfig: %w", n.Name, err)
	}
	s, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: s})
}

// traceHops starts watching the steps of the export of service name from b
// to a.
func (l *Lab) traceHops(ctx context.Context, a, b *cluster.Cluster, ns, name string) (*hopTracer, error) {
	wa, err := l.watchClient(a)
	if err != nil {
		return nil, err
	}
	wb, err := l.watchClient(b)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &hopTracer{stop: cancel}
	key := mcs.Key{Namespace: ns, Name: name}
	holds := func(cm *corev1.ConfigMap) bool {
		set, _, err := mcs.Decode(cm.BinaryData[mcs.DataKey], mcs.Limits{Services: 1 << 20, Endpoints: 1 << 20}, time.Now())
		_, ok := set[key]
		return err == nil && ok
	}
	steps := []struct {
		name string
		c    client.WithWatch
		list client.ObjectList
		opts []client.ListOption
		ok   func(runtime.Object) bool
	}{
		{"exports ConfigMap written in " + b.Name, wb, &corev1.ConfigMapList{},
			[]client.ListOption{client.InNamespace(manifests.TenantNamespace(a.ClusterID)), client.MatchingLabels{mcs.ExchangeLabel: mcs.ExportsRole}},
			func(o runtime.Object) bool { return holds(o.(*corev1.ConfigMap)) }},
		{"imports ConfigMap written in " + a.Name, wa, &corev1.ConfigMapList{},
			[]client.ListOption{client.InNamespace(manifests.TenantNamespace(b.ClusterID)), client.MatchingLabels{mcs.ExchangeLabel: mcs.ImportsRole}},
			func(o runtime.Object) bool { return holds(o.(*corev1.ConfigMap)) }},
		{"ServiceImport with its IP in " + a.Name, wa, &mcsv1beta1.ServiceImportList{},
			[]client.ListOption{client.InNamespace(ns), client.MatchingFields{"metadata.name": name}},
			func(o runtime.Object) bool { return len(o.(*mcsv1beta1.ServiceImport).Spec.IPs) > 0 }},
		{"ready EndpointSlice in " + a.Name, wa, &discoveryv1.EndpointSliceList{},
			[]client.ListOption{client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: name}},
			func(o runtime.Object) bool {
				for _, e := range o.(*discoveryv1.EndpointSlice).Endpoints {
					if e.Conditions.Ready != nil && *e.Conditions.Ready {
						return true
					}
				}
				return false
			}},
	}
	for _, s := range steps {
		w, err := s.c.Watch(ctx, s.list, s.opts...)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("watch for the step %q: %w", s.name, err)
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, open := <-w.ResultChan():
					if !open {
						return
					}
					if (ev.Type == watch.Added || ev.Type == watch.Modified) && s.ok(ev.Object) {
						t.mu.Lock()
						t.hops = append(t.hops, hop{name: s.name, at: time.Now()})
						t.mu.Unlock()
						return
					}
				}
			}
		}()
	}
	return t, nil
}

// done stops the watches and returns the steps seen, in the order seen,
// each with its time since start.
func (t *hopTracer) done(start time.Time) string {
	t.stop()
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, h := range t.hops {
		parts = append(parts, fmt.Sprintf("%s %.2fs", h.name, h.at.Sub(start).Seconds()))
	}
	return strings.Join(parts, ", ")
}
