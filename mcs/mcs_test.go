package mcs

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// echo is a valid exported service with n endpoints.
func echo(ns string, exported time.Time, n int) Service {
	s := Service{
		Key:      Key{Namespace: ns, Name: "echo"},
		Exported: exported,
		Type:     mcsv1beta1.ClusterSetIP,
		Ports:    []Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}},
	}
	g := EndpointGroup{Ports: []Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}}
	for i := range n {
		g.Endpoints = append(g.Endpoints, Endpoint{IP: netip.AddrFrom4([4]byte{10, 244, 0, byte(i + 1)}), Ready: true})
	}
	s.Endpoints = []EndpointGroup{g}
	return s
}

// refusedEdit validates at t0 a valid echo service changed by edit, fails
// the test unless the error names field, and returns the error.
func refusedEdit(t *testing.T, edit func(*Service), field string) error {
	t.Helper()
	s := echo("default", t0, 3)
	edit(&s)
	err := s.Validate(DefaultLimits, t0)
	if err == nil || !strings.Contains(err.Error(), field) {
		t.Fatalf("error %v, want one naming %q", err, field)
	}
	return err
}

func TestValidate(t *testing.T) {
	t0 := time.Unix(1700000000, 0).UTC()
	if err := (func() *Service { s := echo("default", t0, 3); return &s }()).Validate(DefaultLimits, t0); err != nil {
		t.Fatalf("valid service: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Service)
		field string
	}{
		{"bad namespace", func(s *Service) { s.Namespace = "Not/A/Namespace" }, "namespace"},
		{"long name", func(s *Service) { s.Name = strings.Repeat("a", 64) }, "name"},
		{"type", func(s *Service) { s.Type = "ExternalName" }, "type"},
		{"port zero", func(s *Service) { s.Ports[0].Port = 0 }, "ports[0].port"},
		{"protocol", func(s *Service) { s.Ports[0].Protocol = "ICMP" }, "ports[0].protocol"},
		{"port name", func(s *Service) { s.Ports[0].Name = "Not A Name" }, "ports[0].name"},
		{"too many ports", func(s *Service) {
			for i := range 101 {
				s.Ports = append(s.Ports, Port{Protocol: corev1.ProtocolTCP, Port: int32(1000 + i)})
			}
		}, "ports"},
		{"affinity", func(s *Service) { s.SessionAffinity = "Sticky" }, "sessionAffinity"},
		{"label key", func(s *Service) { s.Labels = map[string]string{"no spaces allowed": "x"} }, "labels"},
		{"label value", func(s *Service) { s.Labels = map[string]string{"tier": strings.Repeat("x", 64)} }, "labels: tier: value"},
		{"huge annotation", func(s *Service) { s.Annotations = map[string]string{"a": strings.Repeat("x", 70<<10)} }, "labels and annotations"},
		{"endpoint address", func(s *Service) { s.Endpoints[0].Endpoints[0].IP = netip.Addr{} }, "endpoints[0].endpoints[0].ip"},
		{"hostname", func(s *Service) { s.Endpoints[0].Endpoints[0].Hostname = "under_score" }, "hostname"},
		{"too many endpoints", func(s *Service) { *s = echo(s.Namespace, s.Exported, 250); s.Endpoints = slices.Repeat(s.Endpoints, 5) }, "endpoints: 1250"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedEdit(t, tc.edit, tc.field)
		})
	}
}

func TestEncodeDecode(t *testing.T) {
	t0 := time.Unix(1700000000, 0).UTC()
	in := Set{}
	for i := range 50 {
		s := echo(fmt.Sprintf("ns-%d", i), t0, 10)
		in[s.Key] = s
	}
	bad := echo("bad", t0, 1)
	bad.Type = "Other"
	in[bad.Key] = bad
	data, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, rejected, err := Decode(data, DefaultLimits, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 50 || len(rejected) != 1 || rejected[0].Key != bad.Key {
		t.Errorf("decoded %d services and rejected %v, want 50 and bad/echo", len(out), rejected)
	}
	if _, _, err := Decode(data, Limits{Services: 10, Endpoints: 100}, t0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("51 services under a limit of 10, 41 of them rejected: %v, want ErrTooLarge", err)
	}
	if _, _, err := Decode([]byte("not gzip"), DefaultLimits, t0); err == nil {
		t.Error("garbage decoded")
	}
}

func TestMerge(t *testing.T) {
	t0 := time.Unix(1700000000, 0).UTC()
	// Two peers' exports: the one this cluster saw first is the oldest.
	old, young := echo("default", t0, 2), echo("default", t0, 3)
	old.Seen, young.Seen = t0, t0.Add(time.Minute)
	young.Ports = append(young.Ports, Port{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090},
		Port{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8081}) // clashes by name
	young.SessionAffinity = corev1.ServiceAffinityClientIP
	imports := Merge([]Source{
		{Cluster: "b", Services: Set{young.Key: young}, Live: true},
		{Cluster: "c", Services: Set{old.Key: old}, Live: false},
	})
	imp := imports[old.Key]
	if imp == nil || len(imp.Members) != 2 || imp.Members[0].Cluster != "c" || imp.Members[0].Live {
		t.Fatalf("import %+v: want c (oldest, not live) first", imp)
	}
	if imp.Winner.SessionAffinity != "" {
		t.Errorf("winner's affinity %q, want the oldest export's", imp.Winner.SessionAffinity)
	}
	var names []string
	for _, p := range imp.Ports {
		names = append(names, fmt.Sprintf("%s/%d", p.Name, p.Port))
	}
	if want := []string{"http/8080", "metrics/9090"}; !slices.Equal(names, want) {
		t.Errorf("ports %v, want %v", names, want)
	}
	if want := []string{"PortConflict", "SessionAffinityConflict"}; !slices.Equal(imp.Conflicts, want) {
		t.Errorf("conflicts %v, want %v", imp.Conflicts, want)
	}
	same := Merge([]Source{{Cluster: "b", Services: Set{old.Key: old}}, {Cluster: "c", Services: Set{old.Key: old}}})
	if c := same[old.Key].Conflicts; len(c) != 0 {
		t.Errorf("identical exports conflict: %v", c)
	}
}

// TestRoutedPorts: an import routes a port to a cluster's endpoints only
// when that cluster exports the port as the import carries it.
func TestRoutedPorts(t *testing.T) {
	t0 := time.Unix(1700000000, 0).UTC()
	tcp := func(name string, port int32) Port { return Port{Name: name, Protocol: corev1.ProtocolTCP, Port: port} }
	udp := Port{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 42}
	for _, tc := range []struct {
		name          string
		young         []Port // the younger export's Service ports; both target 42
		old, youngGot []string
	}{
		{"same name, another number", []Port{tcp("tcp", 4242)}, []string{"tcp", "udp"}, nil},
		{"another name", []Port{tcp("tcp2", 4242)}, []string{"tcp", "udp"}, []string{"tcp2"}},
		{"same ports", []Port{tcp("tcp", 42), udp}, []string{"tcp", "udp"}, []string{"tcp", "udp"}},
		{"another protocol under the name", []Port{{Name: "tcp", Protocol: corev1.ProtocolSCTP, Port: 42}}, []string{"tcp", "udp"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := echo("default", t0, 1)
			old.Ports = []Port{tcp("tcp", 42), udp}
			old.Endpoints[0].Ports = []Port{tcp("tcp", 42), udp}
			old.Seen = t0
			young := echo("default", t0, 1)
			young.Seen = t0.Add(time.Second)
			young.Ports = tc.young
			young.Endpoints[0].Ports = nil
			for _, p := range tc.young {
				young.Endpoints[0].Ports = append(young.Endpoints[0].Ports, Port{Name: p.Name, Protocol: p.Protocol, Port: 42})
			}
			imp := Merge([]Source{{Cluster: "a", Services: Set{old.Key: old}}, {Cluster: "b", Services: Set{young.Key: young}}})[old.Key]
			names := func(m Member) []string {
				var out []string
				for _, p := range imp.RoutedPorts(m, m.Service.Endpoints[0]) {
					out = append(out, p.Name)
				}
				return out
			}
			if got := names(imp.Members[0]); !slices.Equal(got, tc.old) {
				t.Errorf("older export's endpoints serve %v, want %v", got, tc.old)
			}
			if got := names(imp.Members[1]); !slices.Equal(got, tc.youngGot) {
				t.Errorf("younger export's endpoints serve %v, want %v", got, tc.youngGot)
			}
		})
	}
}
