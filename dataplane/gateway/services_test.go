package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/api/gatewayrole"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/mcs/store"
)

// lines keeps log lines.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, prefix+" "+args)
}

// count returns how many lines hold s.
func (l *lines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.all {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// TestServicesWrite runs the gateway's writing of the peer's set against a
// real API server: each service stamped with when this gateway first saw
// it, anew when it leaves the set or changes type, and as before after a
// restart (read back from the ConfigMap); a rejected service logged and
// counted once, not at every write; what was rejected summed up on shard
// 0; a set past what one ConfigMap holds stored whole in shards, one
// service changed writing its shard alone, and the shards no longer used
// deleted when the set shrinks.
func TestServicesWrite(t *testing.T) {
	c := tenantClient(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	logs := &lines{}
	a := serviceDeps{opts: Options{Name: "peer", RemoteClusterID: "peer", Role: gatewayrole.Client}, client: c,
		log: funcr.New(logs.add, funcr.Options{}), now: func() time.Time { return now }, metrics: newMetrics(time.Now),
		gatewayRef: (&gatewayObject{opts: Options{Role: gatewayrole.Client}}).ref}
	a.opts.Namespace = "tenant"
	start := func() *imports { return newImports(ctx, a) }
	web := mcs.Service{Key: mcs.Key{Namespace: "demo", Name: "web"}, Exported: now.Add(-time.Hour), Type: mcsv1beta1.ClusterSetIP,
		Ports: []mcs.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}
	web.Normalize()
	bad := mcs.Rejected{Key: mcs.Key{Namespace: "demo", Name: "bad"}, Rule: mcs.RuleInvalid, Reason: "trafficDistribution \"Anywhere\": must be one of ..."}
	stored := func() (mcs.Set, store.Stored) {
		t.Helper()
		st, err := store.Read(ctx, c, "tenant", mcs.ImportsConfigMap, mcs.ImportsRole)
		if err != nil {
			t.Fatal(err)
		}
		set, _, err := mcs.DecodeShards(st.Shards, mcs.DefaultLimits, now)
		if err != nil {
			t.Fatal(err)
		}
		return set, st
	}
	seen := func() time.Time {
		t.Helper()
		set, _ := stored()
		return set[web.Key].Seen
	}
	write := func(s *imports, set mcs.Set, rejected ...mcs.Rejected) {
		t.Helper()
		if err := s.write(ctx, set, rejected); err != nil {
			t.Fatal(err)
		}
	}

	s := start()
	first := now
	write(s, mcs.Set{web.Key: web}, bad)
	if got := seen(); !got.Equal(first) {
		t.Errorf("first seen %v, want %v", got, first)
	}
	// Later writes of the same set, and of another: the service keeps
	// its first sight, and the rejection is logged and counted once.
	now = now.Add(time.Minute)
	write(s, mcs.Set{web.Key: web}, bad)
	scaled := web
	scaled.Endpoints = []mcs.EndpointGroup{{Endpoints: []mcs.Endpoint{{IP: netip.MustParseAddr("10.244.0.9"), Ready: true}}}}
	write(s, mcs.Set{web.Key: scaled}, bad)
	if got := seen(); !got.Equal(first) {
		t.Errorf("seen %v after later writes, want the first sight %v", got, first)
	}
	if n := logs.count(`"service"="demo/bad"`); n != 1 {
		t.Errorf("the rejection of demo/bad logged %d times in three writes, want once:\n%s", n, strings.Join(logs.all, "\n"))
	}
	if n := a.metrics.rejectedServices[mcs.RuleInvalid]; n != 1 {
		t.Errorf("counted %v times, want once", n)
	}
	_, cm := stored()
	var sum mcs.RejectedSummary
	if err := json.Unmarshal([]byte(cm.Annotations[mcs.RejectedSummaryAnnotation]), &sum); err != nil || sum.Rules[mcs.RuleInvalid] != 1 ||
		len(sum.First) != 1 || sum.First[0].Key != bad.Key {
		t.Errorf("summary %q (%v)", cm.Annotations[mcs.RejectedSummaryAnnotation], err)
	}
	// Rejected for another reason: logged and counted again.
	other := bad
	other.Rule, other.Reason = mcs.RuleTotalEndpoints, "the peer's services would hold 50001 endpoints, at most 50000"
	write(s, mcs.Set{web.Key: scaled}, other)
	if n := logs.count(`"service"="demo/bad"`); n != 2 || a.metrics.rejectedServices[mcs.RuleTotalEndpoints] != 1 {
		t.Errorf("a new reason: logged %d times in all, counted %v", n, a.metrics.rejectedServices[mcs.RuleTotalEndpoints])
	}

	// Another type is another export: seen anew, so that it cannot flip
	// an import it was in.
	now = now.Add(time.Minute)
	headless := web
	headless.Type = mcsv1beta1.Headless
	write(s, mcs.Set{web.Key: headless})
	if got := seen(); !got.Equal(now) {
		t.Errorf("seen %v after a change of type, want %v", got, now)
	}
	// Gone and back: seen anew.
	write(s, mcs.Set{})
	now = now.Add(time.Minute)
	back := now
	write(s, mcs.Set{web.Key: web})
	if got := seen(); !got.Equal(back) {
		t.Errorf("seen %v after leaving the set and coming back, want %v", got, back)
	}
	// A new gateway (a restart, a standby taking over) reads the first
	// sights back.
	now = now.Add(time.Hour)
	write(start(), mcs.Set{web.Key: web})
	if got := seen(); !got.Equal(back) {
		t.Errorf("seen %v after a restart, want %v", got, back)
	}

	// Past what a ConfigMap holds: 1,000 services of 25 ports whose
	// appProtocols do not compress, within every total but more than
	// 1 MiB compressed, are stored whole in shards of at most 1 MiB.
	big := mcs.Set{}
	for i := range 1000 {
		svc := web
		svc.Name = fmt.Sprintf("big-%04d", i)
		svc.Ports = nil
		for p := range 25 {
			n := uint64(i*25 + p)
			app := "x" + noise(n)[:40] + ".example/" + noise(n+1<<40)
			svc.Ports = append(svc.Ports, mcs.Port{Name: fmt.Sprintf("p%d", p), Protocol: corev1.ProtocolTCP, Port: int32(1 + p), AppProtocol: &app})
		}
		big[svc.Key] = svc
	}
	write(s, big)
	set, st := stored()
	if len(set) != len(big) || st.Annotations[mcs.RejectedAnnotation] != "0" {
		t.Errorf("%d stored of %d, %s rejected", len(set), len(big), st.Annotations[mcs.RejectedAnnotation])
	}
	total := 0
	for _, sh := range st.Shards {
		total += len(sh.Data)
		if len(sh.Data) > mcs.DefaultLimits.EncodedBytes {
			t.Errorf("shard %d of %d holds %d bytes, more than a ConfigMap takes", sh.Index, sh.Count, len(sh.Data))
		}
	}
	if total <= 1<<20 || len(st.Shards) < 2 {
		t.Errorf("%d bytes in %d shards, want more than 1 MiB in several", total, len(st.Shards))
	}
	t.Logf("%d services, %d bytes compressed, in %d shards", len(set), total, len(st.Shards))

	// One service changed: its shard alone is written again.
	versions := shardVersions(t, c)
	changed := big[mcs.Key{Namespace: "demo", Name: "big-0007"}]
	changed.Ports = changed.Ports[:1]
	big[changed.Key] = changed
	write(s, big)
	if set, _ = stored(); len(set[changed.Key].Ports) != 1 {
		t.Errorf("the changed service has %d ports stored, want 1", len(set[changed.Key].Ports))
	}
	after := shardVersions(t, c)
	rewritten := 0
	for name, v := range after {
		if versions[name] != v {
			rewritten++
		}
	}
	if rewritten != 1 {
		t.Errorf("%d shards written again for one service changed, want 1 (before %v, after %v)", rewritten, versions, after)
	}

	// Back to one service: one shard, the others deleted.
	write(s, mcs.Set{web.Key: web})
	if set, st = stored(); len(set) != 1 || len(st.Shards) != 1 {
		t.Errorf("%d services in %d shards, want 1 in 1", len(set), len(st.Shards))
	}
	if left := shardVersions(t, c); len(left) != 1 {
		t.Errorf("ConfigMaps left: %v, want the one shard", left)
	}
}

// shardVersions returns the resourceVersion of every imports ConfigMap of
// namespace tenant, by name.
func shardVersions(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	var cms corev1.ConfigMapList
	if err := c.List(t.Context(), &cms, client.InNamespace("tenant"), client.MatchingLabels{mcs.ExchangeLabel: mcs.ImportsRole}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, cm := range cms.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

// noise is 48 hexadecimal digits that compress badly.
func noise(n uint64) string {
	return fmt.Sprintf("%016x%016x%016x", n*0x9e3779b97f4a7c15, (n+1)*0xbf58476d1ce4e5b9, (n+2)*0x94d049bb133111eb)
}
