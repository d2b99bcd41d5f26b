package reconciler

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/mcs"
)

// refusedCount reads the controller's count of refusals for rule.
func refusedCount(t *testing.T, rule string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "peerlink_controller_service_imports_refused_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == rule {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// eventsOn lists the messages of the Events of reason on object name in
// namespace ns.
func eventsOn(ctx context.Context, c client.Client, ns, name, reason string) ([]string, error) {
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out, nil
}

// groups returns n endpoint groups of one endpoint in b's range.
func groups(n int) []mcs.EndpointGroup {
	out := make([]mcs.EndpointGroup, n)
	for i := range out {
		out[i] = mcs.EndpointGroup{Ports: []mcs.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}},
			Endpoints: []mcs.Endpoint{{IP: netip.AddrFrom4([4]byte{10, 244, 3, byte(i + 1)}), Ready: true}}}
	}
	return out
}

// TestServicesHostilePeer: what peer b's gateway wrote is taken within
// the limits, one version at a time. A service past a total, or with a
// field the API server would refuse, is refused alone (counted, and an
// Event on b's Configuration), the others imported; a set that is not one
// is refused whole and what was imported stands; a forged export time
// does not take the service this cluster exports, nor flip its type, and
// the conflict is reported on the local export.
func TestServicesHostilePeer(t *testing.T) {
	e := newConfEnv(t, "peerlink", "demo", "liqo-tenant-b")
	e.facts.ServiceLimits = mcs.Limits{TotalEndpointGroups: 4}
	c := e.cluster.Client
	ctx := t.Context()
	// The reads of b's imports shards from the API server, besides the
	// cache's lists and watches (of every namespace).
	reads := &requestCounter{match: func(method, path string) bool {
		return method == "GET" && strings.HasSuffix(path, "/namespaces/liqo-tenant-b/configmaps")
	}}
	e.wrap = reads.wrap
	e.run(t)
	e.importFromB(t)

	// This cluster exports demo/web, ClusterSetIP on port 80.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}
	for _, o := range []client.Object{svc, export} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// b's: demo/web forged (exported in 1971, headless, port 9999), seen
	// here after the local export; two services of two groups each (the
	// total of 4); one more past it; one with a field the API server
	// refuses.
	web := peerWeb(9999)
	web.Exported, web.Type, web.Endpoints = time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC), mcsv1beta1.Headless, nil
	web.Seen = export.CreationTimestamp.Add(time.Minute).UTC()
	var sent []mcs.Service
	for i, name := range []string{"a", "b", "c"} {
		s := peerWeb(80)
		s.Name, s.Endpoints = name, groups(2-i/2)
		sent = append(sent, s)
	}
	bad := peerWeb(80)
	bad.Name, bad.TrafficDistribution = "bad", ptr.To("Anywhere")
	before := map[string]float64{}
	for _, rule := range mcs.Rules() {
		before[rule] = refusedCount(t, rule)
	}
	receive(t, c, "liqo-tenant-b", append(sent, web, bad)...)

	waitFor(t, "a and b imported, c (past the total of groups) and bad (its traffic distribution) refused", func(ctx context.Context) error {
		for name, want := range map[string]bool{"a": true, "b": true, "web": true, "c": false, "bad": false} {
			var si mcsv1beta1.ServiceImport
			err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: name}, &si)
			if want && err != nil || !want && !apierrors.IsNotFound(err) {
				return fmt.Errorf("import demo/%s: %v", name, err)
			}
		}
		var slices discoveryv1.EndpointSliceList
		if err := c.List(ctx, &slices, client.InNamespace("demo"), client.MatchingLabels{mcsv1beta1.LabelSourceCluster: "b"}); err != nil {
			return err
		}
		if len(slices.Items) != 4 {
			return fmt.Errorf("%d slices from b, want the 4 of the limit", len(slices.Items))
		}
		return nil
	})
	waitFor(t, "the refusals counted and reported on b's Configuration", func(ctx context.Context) error {
		for rule, field := range map[string]string{mcs.RuleTotalEndpointGroups: "demo/c", mcs.RuleInvalid: "trafficDistribution"} {
			if got := refusedCount(t, rule) - before[rule]; got != 1 {
				return fmt.Errorf("%s counted %v times", rule, got)
			}
			msgs, err := eventsOn(ctx, c, "liqo-tenant-b", "b", "ImportRefused")
			if err != nil {
				return err
			}
			if !strings.Contains(strings.Join(msgs, "\n"), field) {
				return fmt.Errorf("no ImportRefused event naming %s: %q", field, msgs)
			}
		}
		return nil
	})
	waitFor(t, "the local export in effect, the conflict reported", func(ctx context.Context) error {
		var si mcsv1beta1.ServiceImport
		if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "web"}, &si); err != nil {
			return err
		}
		if si.Spec.Type != mcsv1beta1.ClusterSetIP || len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 80 || len(si.Spec.IPs) == 0 {
			return fmt.Errorf("import demo/web %+v: b's forged export took it", si.Spec)
		}
		var se mcsv1beta1.ServiceExport
		if err := c.Get(ctx, client.ObjectKeyFromObject(export), &se); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(se.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict))
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Reason, "TypeConflict") ||
			!strings.Contains(cond.Message, "this cluster's export is in effect") {
			return fmt.Errorf("Conflict: %+v", cond)
		}
		msgs, err := eventsOn(ctx, c, "demo", "web", string(mcsv1beta1.ServiceExportConditionConflict))
		if err != nil || len(msgs) == 0 {
			return fmt.Errorf("no Conflict event on the export (%v)", err)
		}
		return nil
	})

	// One decode per version of the ConfigMap: a new Configuration does
	// not read it again, a new version is read and counted once.
	counted := refusedCount(t, mcs.RuleInvalid)
	readsBefore := reads.count()
	conf := e.get(t, "liqo-tenant-b", "b")
	conf.Annotations = map[string]string{"example.com/touched": "yes"}
	if err := c.Update(ctx, conf); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if got := reads.count(); got != readsBefore || refusedCount(t, mcs.RuleInvalid) != counted {
		t.Errorf("a new version of the Configuration: %d reads of the imports ConfigMap, refusals counted again %v times",
			got-readsBefore, refusedCount(t, mcs.RuleInvalid)-counted)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, types.NamespacedName{Namespace: "liqo-tenant-b", Name: mcs.ImportsConfigMap}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Annotations = map[string]string{"example.com/touched": "yes"}
	if err := c.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new version decoded", func(context.Context) error {
		if refusedCount(t, mcs.RuleInvalid) == counted {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if got := refusedCount(t, mcs.RuleInvalid) - counted; got != 1 {
		t.Errorf("one new version decoded %v times", got)
	}

	// A set that is not one is refused whole: what was imported stands.
	undecodable := refusedCount(t, mcs.RuleUndecodable)
	cm.BinaryData[mcs.DataKey] = []byte("not a set")
	if err := c.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the set refused whole, reported", func(ctx context.Context) error {
		msgs, err := eventsOn(ctx, c, "liqo-tenant-b", "b", "ImportsRefused")
		if err != nil || len(msgs) == 0 {
			return fmt.Errorf("no ImportsRefused event (%v)", err)
		}
		if refusedCount(t, mcs.RuleUndecodable) == undecodable {
			return fmt.Errorf("not counted")
		}
		return nil
	})
	time.Sleep(time.Second)
	for _, name := range []string{"a", "b", "web"} {
		var si mcsv1beta1.ServiceImport
		if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: name}, &si); err != nil {
			t.Errorf("import demo/%s after a set refused whole: %v", name, err)
		}
	}
}

// requestCounter counts the requests to the API server that match.
type requestCounter struct {
	match func(method, path string) bool
	mu    sync.Mutex
	n     int
}

func (r *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if r.match(req.Method, req.URL.Path) {
			r.mu.Lock()
			r.n++
			r.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (r *requestCounter) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestStripImportsData: the controller's cache keeps the imports
// ConfigMaps without their data (read from the API server once per
// version instead), and the exports ConfigMaps whole.
func TestStripImportsData(t *testing.T) {
	cm := func(role string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{mcs.ExchangeLabel: role}},
			BinaryData: map[string][]byte{mcs.DataKey: []byte("set")}}
	}
	for role, kept := range map[string]bool{mcs.ImportsRole: false, mcs.ExportsRole: true} {
		got, err := stripImportsData(cm(role))
		if err != nil {
			t.Fatal(err)
		}
		if has := got.(*corev1.ConfigMap).BinaryData != nil; has != kept {
			t.Errorf("%s: data kept %t, want %t", role, has, kept)
		}
	}
}
