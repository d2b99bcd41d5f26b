package mcs

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestMergeObserved: the oldest export is the one this cluster knew
// first, by its own clock: a peer's claimed export time decides nothing,
// so a forged one cannot take a service this cluster exports, nor flip
// its type.
func TestMergeObserved(t *testing.T) {
	local := echo("default", t0, 1) // this cluster's ServiceExport, made at t0
	forged := echo("default", time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC), 1)
	forged.Type, forged.Ports = mcsv1beta1.Headless, []Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 9999}}
	peer := func(s Service, seen time.Time) Service { s.Seen = seen; return s }
	winner := func(sources ...Source) (string, *Import) {
		imp := Merge(sources)[local.Key]
		return imp.Members[0].Cluster, imp
	}
	for _, tc := range []struct {
		name    string
		sources []Source
		want    string
	}{
		{"a forged export time, seen after the local export", []Source{
			{Cluster: "a", Services: Set{local.Key: peer(forged, t0.Add(time.Minute))}},
			{Cluster: "here", Services: Set{local.Key: local}, Local: true},
		}, "here"},
		{"a forged export time, never stamped", []Source{
			{Cluster: "a", Services: Set{local.Key: forged}},
			{Cluster: "here", Services: Set{local.Key: local}, Local: true},
		}, "here"},
		{"seen at the same time as the local export", []Source{
			{Cluster: "a", Services: Set{local.Key: peer(forged, t0)}},
			{Cluster: "here", Services: Set{local.Key: local}, Local: true},
		}, "here"},
		{"seen before the local export was made", []Source{
			{Cluster: "a", Services: Set{local.Key: peer(forged, t0.Add(-time.Minute))}},
			{Cluster: "here", Services: Set{local.Key: local}, Local: true},
		}, "a"},
		{"between peers, the one seen first", []Source{
			{Cluster: "a", Services: Set{local.Key: peer(forged, t0.Add(time.Hour))}},
			{Cluster: "b", Services: Set{local.Key: peer(local, t0.Add(time.Minute))}},
		}, "b"},
		{"between peers, a stamped one before one never seen", []Source{
			{Cluster: "a", Services: Set{local.Key: forged}},
			{Cluster: "b", Services: Set{local.Key: peer(local, t0.Add(time.Hour))}},
		}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, imp := winner(tc.sources...)
			if got != tc.want {
				t.Fatalf("winner %s, want %s", got, tc.want)
			}
			if want := []string{"PortConflict", "TypeConflict"}; !slices.Equal(imp.Conflicts, want) {
				t.Errorf("conflicts %v, want %v", imp.Conflicts, want)
			}
			if tc.want != "a" && (imp.Winner.Type != mcsv1beta1.ClusterSetIP || imp.Ports[0].Port != 8080) {
				t.Errorf("the import is %s on port %d: the peer's export took it", imp.Winner.Type, imp.Ports[0].Port)
			}
		})
	}
}

// TestMergeUnnamedPort: a port without a name stays alone in the import,
// as a Service of several ports names them all.
func TestMergeUnnamedPort(t *testing.T) {
	for _, tc := range []struct {
		name       string
		old, young []Port
		want       []string
	}{
		{"unnamed first", []Port{{Protocol: corev1.ProtocolTCP, Port: 80}}, []Port{{Name: "b", Protocol: corev1.ProtocolTCP, Port: 81}}, []string{"/80"}},
		{"unnamed later", []Port{{Name: "a", Protocol: corev1.ProtocolTCP, Port: 80}}, []Port{{Protocol: corev1.ProtocolTCP, Port: 81}}, []string{"a/80"}},
		{"named both", []Port{{Name: "a", Protocol: corev1.ProtocolTCP, Port: 80}}, []Port{{Name: "b", Protocol: corev1.ProtocolTCP, Port: 81}}, []string{"a/80", "b/81"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, young := echo("default", t0, 1), echo("default", t0, 1)
			old.Ports, young.Ports, young.Seen = tc.old, tc.young, t0.Add(time.Second)
			imp := Merge([]Source{{Cluster: "here", Services: Set{old.Key: old}, Local: true}, {Cluster: "b", Services: Set{young.Key: young}}})[old.Key]
			var got []string
			for _, p := range imp.Ports {
				got = append(got, fmt.Sprintf("%s/%d", p.Name, p.Port))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ports %v, want %v", got, tc.want)
			}
		})
	}
}

// TestServiceEqual: a change of any field of a service, or of an import,
// makes it differ; every field of Service is covered.
func TestServiceEqual(t *testing.T) {
	base := func() Service {
		s := echo("default", t0, 3)
		s.Normalize()
		s.Labels, s.Annotations = map[string]string{"a": "1"}, map[string]string{"b": "2"}
		s.TrafficDistribution = ptr.To("PreferClose")
		s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10)}}
		s.Ports[0].AppProtocol = ptr.To("http")
		return s
	}
	edits := map[string]func(*Service){
		"Key":                   func(s *Service) { s.Name = "other" },
		"Exported":              func(s *Service) { s.Exported = s.Exported.Add(time.Second) },
		"Seen":                  func(s *Service) { s.Seen = t0 },
		"Type":                  func(s *Service) { s.Type = mcsv1beta1.Headless },
		"Ports":                 func(s *Service) { s.Ports[0].AppProtocol = ptr.To("h2c") },
		"SessionAffinity":       func(s *Service) { s.SessionAffinity = corev1.ServiceAffinityClientIP },
		"SessionAffinityConfig": func(s *Service) { s.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To[int32](11) },
		"InternalTrafficPolicy": func(s *Service) { s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal) },
		"TrafficDistribution":   func(s *Service) { s.TrafficDistribution = nil },
		"IPFamilies":            func(s *Service) { s.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} },
		"Labels":                func(s *Service) { s.Labels["a"] = "3" },
		"Annotations":           func(s *Service) { delete(s.Annotations, "b") },
		"Endpoints":             func(s *Service) { s.Endpoints[0].Endpoints[2].Ready = false },
	}
	for i := range reflect.TypeFor[Service]().NumField() {
		if name := reflect.TypeFor[Service]().Field(i).Name; edits[name] == nil {
			t.Errorf("no case changes field %s", name)
		}
	}
	a := base()
	if b := base(); !a.Equal(&b) {
		t.Fatal("two equal services differ")
	}
	for name, edit := range edits {
		b := base()
		edit(&b)
		if a.Equal(&b) || b.Equal(&a) {
			t.Errorf("a change of %s: still equal", name)
		}
		imp, other := &Import{Key: a.Key, Winner: a, Members: []Member{{Cluster: "x", Service: a}}}, &Import{Key: a.Key, Winner: a, Members: []Member{{Cluster: "x", Service: b}}}
		if imp.Equal(other) {
			t.Errorf("a change of a member's %s: the imports still equal", name)
		}
	}
}
