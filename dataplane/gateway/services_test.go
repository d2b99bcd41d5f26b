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
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/peerlink/peerlink/api/gatewayrole"
	"github.com/peerlink/peerlink/mcs"
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
// counted once, not at every write; the set kept within the bounds the
// controller reads it with, and what was rejected summed up on the
// ConfigMap.
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
	stored := func() (mcs.Set, *corev1.ConfigMap) {
		t.Helper()
		var cm corev1.ConfigMap
		if err := c.Get(ctx, types.NamespacedName{Namespace: "tenant", Name: mcs.ImportsConfigMap}, &cm); err != nil {
			t.Fatal(err)
		}
		set, _, err := mcs.Decode(cm.BinaryData[mcs.DataKey], mcs.DefaultLimits, now)
		if err != nil {
			t.Fatal(err)
		}
		return set, &cm
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

	// Past what a ConfigMap holds: the services past the bound, in key
	// order, are rejected; what is stored reads back whole.
	// 1,000 services of 25 ports whose appProtocols do not compress:
	// within every total, but more than 1 MiB compressed.
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
	set, cm := stored()
	sum = mcs.RejectedSummary{}
	if err := json.Unmarshal([]byte(cm.Annotations[mcs.RejectedSummaryAnnotation]), &sum); err != nil {
		t.Fatal(err)
	}
	if len(set)+sum.Rules[mcs.RuleEncodedBytes] != len(big) || sum.Rules[mcs.RuleEncodedBytes] == 0 {
		t.Errorf("%d stored, %v rejected, of %d", len(set), sum.Rules, len(big))
	}
	if _, ok := set[mcs.Key{Namespace: "demo", Name: "big-0000"}]; !ok {
		t.Error("big-0000, first by key, was left out")
	}
}

// noise is 48 hexadecimal digits that compress badly.
func noise(n uint64) string {
	return fmt.Sprintf("%016x%016x%016x", n*0x9e3779b97f4a7c15, (n+1)*0xbf58476d1ce4e5b9, (n+2)*0x94d049bb133111eb)
}
