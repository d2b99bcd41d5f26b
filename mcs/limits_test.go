package mcs

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var t0 = time.Unix(1700000000, 0).UTC()

// TestValidateFields: every field a peer sends is checked as the API
// server would check the objects it becomes; the service is refused
// alone, with the field and the rule named.
func TestValidateFields(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Service)
		field string
		rule  string
	}{
		{"appProtocol", func(s *Service) { s.Ports[0].AppProtocol = ptr.To("not a/protocol") }, "ports[0].appProtocol", RuleInvalid},
		{"appProtocol of a group", func(s *Service) { s.Endpoints[0].Ports[0].AppProtocol = ptr.To("-h2c") }, "endpoints[0].ports[0].appProtocol", RuleInvalid},
		{"trafficDistribution", func(s *Service) { s.TrafficDistribution = ptr.To("Anywhere") }, "trafficDistribution", RuleInvalid},
		{"internalTrafficPolicy", func(s *Service) { s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicy("Nearby")) }, "internalTrafficPolicy", RuleInvalid},
		{"affinity timeout zero", func(s *Service) {
			s.SessionAffinity = corev1.ServiceAffinityClientIP
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(0))}}
		}, "sessionAffinityConfig.clientIP.timeoutSeconds 0", RuleInvalid},
		{"affinity timeout over a day", func(s *Service) {
			s.SessionAffinity = corev1.ServiceAffinityClientIP
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(86401))}}
		}, "sessionAffinityConfig.clientIP.timeoutSeconds 86401", RuleInvalid},
		{"affinity config without a timeout", func(s *Service) {
			s.SessionAffinity = corev1.ServiceAffinityClientIP
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
		}, "sessionAffinityConfig.clientIP.timeoutSeconds", RuleInvalid},
		{"affinity config without ClientIP", func(s *Service) {
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(60))}}
		}, "sessionAffinityConfig: must not be set", RuleInvalid},
		{"ip family", func(s *Service) { s.IPFamilies = []corev1.IPFamily{"IPv5"} }, "ipFamilies[0]", RuleInvalid},
		{"ip family twice", func(s *Service) { s.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv4Protocol} }, "ipFamilies[1]", RuleInvalid},
		{"three ip families", func(s *Service) {
			s.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol, corev1.IPv4Protocol}
		}, "ipFamilies", RuleInvalid},
		{"no export time", func(s *Service) { s.Exported = time.Time{} }, "exported", RuleInvalid},
		{"export time of year 1", func(s *Service) { s.Exported = time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC) }, "exported", RuleInvalid},
		{"export time in the future", func(s *Service) { s.Exported = t0.Add(MaxClockSkew + time.Second) }, "exported", RuleInvalid},
		{"unnamed port among several", func(s *Service) {
			s.Ports = append(s.Ports, Port{Protocol: corev1.ProtocolTCP, Port: 9090})
		}, "ports[1].name", RuleInvalid},
		{"port name twice", func(s *Service) {
			s.Ports = append(s.Ports, Port{Name: "http", Protocol: corev1.ProtocolTCP, Port: 9090})
		}, "ports[1].name", RuleInvalid},
		{"port number twice", func(s *Service) {
			s.Ports = append(s.Ports, Port{Name: "other", Protocol: corev1.ProtocolTCP, Port: 8080})
		}, "ports[1]: TCP 8080 repeated", RuleInvalid},
		{"group port name twice", func(s *Service) {
			s.Endpoints[0].Ports = append(s.Endpoints[0].Ports, Port{Name: "http", Protocol: corev1.ProtocolUDP, Port: 53})
		}, "endpoints[0].ports[1].name", RuleInvalid},
		{"clusterset IP without ports", func(s *Service) { s.Ports = nil }, "ports", RuleInvalid},
		{"group over an EndpointSlice", func(s *Service) {
			*s = echo(s.Namespace, s.Exported, maxGroupEndpoints+1)
		}, "endpoints[0].endpoints: 1001", RuleInvalid},
		{"endpoints", func(s *Service) {
			*s = echo(s.Namespace, s.Exported, 501)
			s.Endpoints = append(s.Endpoints, s.Endpoints[0])
		}, "endpoints: 1002", RuleEndpoints},
		{"endpoint groups", func(s *Service) {
			s.Endpoints = slices.Repeat([]EndpointGroup{{}}, 101)
		}, "endpoints: 101 groups", RuleEndpointGroups},
		{"metadata bytes", func(s *Service) { s.Annotations = map[string]string{"a": strings.Repeat("x", 64<<10)} }, "65537 bytes", RuleMetadataBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := refusedEdit(t, tc.edit, tc.field)
			if got := RuleOf(err); got != tc.rule {
				t.Errorf("rule %q, want %q (%v)", got, tc.rule, err)
			}
		})
	}
	// At each bound, and every value the API server takes, passes.
	for name, edit := range map[string]func(*Service){
		"1000 endpoints":     func(s *Service) { *s = echo(s.Namespace, s.Exported, 1000) },
		"100 empty groups":   func(s *Service) { s.Endpoints = slices.Repeat([]EndpointGroup{{}}, 100) },
		"64 KiB of metadata": func(s *Service) { s.Annotations = map[string]string{"a": strings.Repeat("x", 64<<10-1)} },
		"PreferSameNode":     func(s *Service) { s.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferSameNode) },
		"Local":              func(s *Service) { s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal) },
		"a day of affinity": func(s *Service) {
			s.SessionAffinity, s.SessionAffinityConfig = corev1.ServiceAffinityClientIP, &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(86400))}}
		},
		"ClientIP by default": func(s *Service) { s.SessionAffinity = corev1.ServiceAffinityClientIP },
		"dual stack":          func(s *Service) { s.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol} },
		"IANA appProtocol":    func(s *Service) { s.Ports[0].AppProtocol = ptr.To("http") },
		"prefixed appProtocol": func(s *Service) {
			s.Ports[0].AppProtocol = ptr.To("kubernetes.io/h2c")
		},
		"exported a day ahead": func(s *Service) { s.Exported = t0.Add(MaxClockSkew) },
		"headless, no ports":   func(s *Service) { s.Type, s.Ports = mcsv1beta1.Headless, nil },
	} {
		s := echo("default", t0, 3)
		edit(&s)
		if err := s.Validate(DefaultLimits, t0); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// numbered returns n valid services default/s00000..., each edited by
// edit.
func numbered(n int, edit func(i int, s *Service)) []Service {
	out := make([]Service, n)
	for i := range out {
		s := echo("default", t0, 0)
		s.Name = fmt.Sprintf("s%05d", i)
		s.Endpoints = nil
		if edit != nil {
			edit(i, &s)
		}
		out[i] = s
	}
	return out
}

func setOf(services []Service) Set {
	set := Set{}
	for _, s := range services {
		set[s.Key] = s
	}
	return set
}

func decodeSet(t *testing.T, services []Service, l Limits) (Set, []Rejected) {
	t.Helper()
	data, err := Encode(setOf(services))
	if err != nil {
		t.Fatal(err)
	}
	got, rejected, err := Decode(data, l, t0)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return got, rejected
}

// TestDecodeTotals: with the default limits, a set just at each total is
// taken whole, and one service more is refused alone, with the limit's
// rule: the services past it in key order, never the whole set.
func TestDecodeTotals(t *testing.T) {
	groups := func(n int) func(int, *Service) {
		return func(_ int, s *Service) { s.Endpoints = make([]EndpointGroup, n) }
	}
	endpoints := func(i int, s *Service) { *s = echo(s.Namespace, s.Exported, 1000); s.Name = fmt.Sprintf("s%05d", i) }
	metadata := func(_ int, s *Service) { s.Annotations = map[string]string{"a": strings.Repeat("x", 64<<10-1)} }
	for _, tc := range []struct {
		name string
		at   int // services at the limit
		edit func(int, *Service)
		rule string
	}{
		{"services", 2000, nil, RuleServices},
		{"endpoint groups (EndpointSlices)", 50, groups(100), RuleTotalEndpointGroups},
		{"endpoints", 20, endpoints, RuleTotalEndpoints},
		{"labels and annotations", 4, metadata, RuleTotalMetadataBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, rejected := decodeSet(t, numbered(tc.at, tc.edit), DefaultLimits)
			if len(got) != tc.at || len(rejected) != 0 {
				t.Fatalf("at the limit: %d taken, %d rejected (%v), want all %d taken", len(got), len(rejected), rejected, tc.at)
			}
			got, rejected = decodeSet(t, numbered(tc.at+1, tc.edit), DefaultLimits)
			last := numbered(tc.at+1, tc.edit)[tc.at].Key
			if len(got) != tc.at || len(rejected) != 1 || rejected[0].Key != last || rejected[0].Rule != tc.rule {
				t.Fatalf("one over: %d taken, rejected %v, want %d taken and %s rejected for %s", len(got), rejected, tc.at, last, tc.rule)
			}
		})
	}
	t.Run("2000 services of 100 empty groups", func(t *testing.T) {
		// As a peer sends them, empty groups written {}: 2,000 of them fit
		// in less than a ConfigMap, and would be 200,000 EndpointSlices.
		data, err := Encode(setOf(numbered(2000, groups(100))))
		if err != nil {
			t.Fatal(err)
		}
		data = gzipped(t, bytes.ReplaceAll(gunzipped(t, data), []byte(`{"ports":null,"endpoints":null}`), []byte(`{}`)))
		got, rejected, err := Decode(data, DefaultLimits, t0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 50 || len(rejected) != 1950 {
			t.Fatalf("%d taken, %d rejected, want the first 50 taken (5000 EndpointSlices)", len(got), len(rejected))
		}
		for _, r := range rejected {
			if r.Rule != RuleTotalEndpointGroups || r.Key.Name < "s00050" {
				t.Fatalf("rejected %v", r)
			}
		}
	})
	t.Run("a small service after a refused large one", func(t *testing.T) {
		// The refusal is of that service: a later one that fits is
		// taken.
		got, rejected := decodeSet(t, numbered(51, func(i int, s *Service) {
			if i < 50 {
				groups(100)(i, s)
			}
		}), DefaultLimits)
		if len(got) != 51 || len(rejected) != 0 {
			t.Fatalf("%d taken, rejected %v", len(got), rejected)
		}
	})
}

// gzipped compresses raw as a stored set is.
func gzipped(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gunzipped decompresses a stored set.
func gunzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestDecodeDocument: a document over its bytes, not a set, or a flood of
// refused services is refused whole, with the rule.
func TestDecodeDocument(t *testing.T) {
	one := `{"namespace":"a","name":"b","exported":"2023-11-14T22:13:20Z","type":"ClusterSetIP","ports":[{"protocol":"TCP","port":80}]}`
	padded := func(n int) []byte {
		// A valid set of one service, padded with whitespace to n bytes.
		head, tail := `{"version":1,"services":[`+one, `]}`
		return []byte(head + strings.Repeat(" ", n-len(head)-len(tail)) + tail)
	}
	random := make([]byte, 512<<10)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rnd.Uint32())
	}
	for _, tc := range []struct {
		name string
		data []byte
		rule string
		keep int
	}{
		{"just under the decompressed bound", gzipped(t, padded(DefaultLimits.DocumentBytes)), "", 1},
		{"just over the decompressed bound", gzipped(t, padded(DefaultLimits.DocumentBytes+1)), RuleDocumentBytes, 0},
		{"a gzip bomb", gzipped(t, bytes.Repeat([]byte(" "), 64<<20)), RuleDocumentBytes, 0},
		{"just under the stored bound", append(gzipped(t, padded(400)), make([]byte, DefaultLimits.EncodedBytes-len(gzipped(t, padded(400))))...), "", 1},
		{"just over the stored bound", append(gzipped(t, padded(400)), make([]byte, DefaultLimits.EncodedBytes+1-len(gzipped(t, padded(400))))...), RuleEncodedBytes, 0},
		{"random bytes", gzipped(t, random), RuleUndecodable, 0},
		{"not gzip", []byte("not gzip"), RuleUndecodable, 0},
		{"not JSON", gzipped(t, []byte(`{"version":1,"services":[{"name":`)), RuleUndecodable, 0},
		{"another version", gzipped(t, []byte(`{"version":2,"services":[]}`)), RuleUndecodable, 0},
		{"a flood of refused services", gzipped(t, []byte(`{"version":1,"services":[`+strings.Repeat(`{},`, 2001)+`{}]}`)), RuleServices, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, _, err := Decode(tc.data, DefaultLimits, t0)
			if got := ruleOrEmpty(err); got != tc.rule || len(set) != tc.keep {
				t.Fatalf("rule %q, %d services (%v), want %q and %d", got, len(set), err, tc.rule, tc.keep)
			}
			if tc.rule != "" && tc.rule != RuleUndecodable && !errors.Is(err, ErrTooLarge) {
				t.Errorf("%v does not wrap ErrTooLarge", err)
			}
		})
	}
}

func ruleOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return RuleOf(err)
}

// TestDecodeOrder: a stored set lists each service once, in key order; a
// service repeated or out of order is rejected, a value of the wrong
// shape is rejected alone, and the rest stands.
func TestDecodeOrder(t *testing.T) {
	a := `{"namespace":"a","name":"a","exported":"2023-11-14T22:13:20Z","type":"ClusterSetIP","ports":[{"protocol":"TCP","port":80}]}`
	b := strings.Replace(a, `"name":"a"`, `"name":"b"`, 1)
	c := strings.Replace(a, `"name":"a"`, `"name":"c"`, 1)
	wrong := strings.Replace(c, `"port":80`, `"port":"eighty"`, 1)
	data := gzipped(t, []byte(`{"version":1,"services":[`+strings.Join([]string{a, c, b, c, wrong, `{"name":7}`}, ",")+`],"later":{"x":[1,2]}}`))
	set, rejected, err := Decode(data, DefaultLimits, t0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rejected {
		got = append(got, r.Key.String()+" "+r.Rule)
	}
	if want := []string{"a/b duplicate", "a/c duplicate", "a/c invalid", "/ invalid"}; len(set) != 2 || !slices.Equal(got, want) {
		t.Errorf("kept %d, rejected %v, want a/a and a/c kept, rejected %v", len(set), got, want)
	}
}

// TestEncodeWithin: the gateway's set is stored within the bounds the
// controller reads it with, trimmed in key order; what it stores decodes
// whole.
func TestEncodeWithin(t *testing.T) {
	// Ports whose appProtocols do not compress: 1,000 services of 30,
	// within every total and under the decompressed bound, are about 1.3
	// MiB compressed, past the 1 MiB a ConfigMap holds.
	services := incompressible(1000)
	data, rejected, err := EncodeWithin(setOf(services), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > DefaultLimits.EncodedBytes || len(rejected) == 0 || len(rejected) == len(services) {
		t.Fatalf("%d bytes stored, %d rejected: want at most %d bytes and some services left out", len(data), len(rejected), DefaultLimits.EncodedBytes)
	}
	for i, r := range rejected {
		if r.Rule != RuleEncodedBytes || r.Key != services[len(services)-len(rejected)+i].Key {
			t.Fatalf("rejected %v: want the last services by key, for %s", r, RuleEncodedBytes)
		}
	}
	set, again, err := Decode(data, DefaultLimits, t0)
	if err != nil || len(again) != 0 || len(set) != len(services)-len(rejected) {
		t.Fatalf("decoding what was stored: %d services, rejected %v, %v", len(set), again, err)
	}
	// A set that fits is stored as Encode stores it.
	small := setOf(numbered(10, nil))
	a, rejected, err := EncodeWithin(small, DefaultLimits)
	b, _ := Encode(small)
	if err != nil || len(rejected) != 0 || !bytes.Equal(a, b) {
		t.Errorf("a small set: rejected %v, %v, same bytes as Encode: %t", rejected, err, bytes.Equal(a, b))
	}
	// Past the decompressed bound, by the same rule the reader applies.
	ports := numbered(2000, func(_ int, s *Service) {
		s.Ports = nil
		for p := range 100 {
			s.Ports = append(s.Ports, Port{Name: fmt.Sprintf("port-%02d", p), Protocol: corev1.ProtocolTCP, Port: int32(1000 + p),
				AppProtocol: ptr.To("example.com/" + strings.Repeat("p", 40))})
		}
	})
	data, rejected, err = EncodeWithin(setOf(ports), DefaultLimits)
	if err != nil || len(rejected) == 0 || rejected[0].Rule != RuleDocumentBytes {
		t.Fatalf("2000 services of 100 long ports: rejected %d (first %v), %v", len(rejected), rejected[:min(1, len(rejected))], err)
	}
	if _, again, err := Decode(data, DefaultLimits, t0); err != nil || len(again) != 0 {
		t.Fatalf("decoding what was stored: rejected %v, %v", again, err)
	}
}

// incompressible returns n services of 30 ports each, whose
// appProtocols do not compress.
func incompressible(n int) []Service {
	rnd := rand.New(rand.NewPCG(1, 2))
	return numbered(n, func(_ int, s *Service) {
		s.Ports = nil
		for p := range 30 {
			b := make([]byte, 60)
			for i := range b {
				b[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rnd.IntN(36)]
			}
			s.Ports = append(s.Ports, Port{Name: fmt.Sprintf("p%d", p), Protocol: corev1.ProtocolTCP, Port: int32(1 + p),
				AppProtocol: ptr.To("example.com/" + string(b))})
		}
	})
}

// worstSets are sets a peer may send within the default limits, each
// heavy in one thing, for the memory bound.
func worstSets() map[string][]Service {
	return map[string][]Service{
		// The most endpoints, each with a hostname.
		"endpoints": numbered(20, func(i int, s *Service) {
			g := EndpointGroup{Ports: s.Ports}
			for j := range 1000 {
				g.Endpoints = append(g.Endpoints, Endpoint{IP: netip.AddrFrom4([4]byte{10, byte(i), byte(j >> 8), byte(j)}),
					Hostname: fmt.Sprintf("%s-%04d", strings.Repeat("h", 58), j), Ready: true})
			}
			s.Endpoints = []EndpointGroup{g}
		}),
		// The most endpoint groups, each with ports.
		"groups": numbered(50, func(_ int, s *Service) {
			for range 100 {
				s.Endpoints = append(s.Endpoints, EndpointGroup{Ports: s.Ports})
			}
		}),
		// The most small annotations, which cost the most as a map.
		"annotations": numbered(2000, func(i int, s *Service) {
			s.Annotations = map[string]string{}
			for j := range 42 {
				s.Annotations[fmt.Sprintf("k%02d", j)] = ""
			}
		}),
		// All of it: the most annotations and endpoints, and ports up to
		// the decompressed bound.
		"mixed": numbered(2000, func(i int, s *Service) {
			s.Annotations = map[string]string{}
			for j := range 42 {
				s.Annotations[fmt.Sprintf("k%02d", j)] = ""
			}
			if i < 20 {
				g := EndpointGroup{Ports: s.Ports}
				for j := range 1000 {
					g.Endpoints = append(g.Endpoints, Endpoint{IP: netip.AddrFrom4([4]byte{10, byte(i), byte(j >> 8), byte(j)}), Ready: true})
				}
				s.Endpoints = []EndpointGroup{g}
				return
			}
			s.Ports = nil
			for p := range 100 {
				s.Ports = append(s.Ports, Port{Name: fmt.Sprintf("p%d", p), Protocol: corev1.ProtocolTCP, Port: int32(1 + p)})
			}
		}),
		// Ports up to the decompressed bound.
		"ports": numbered(2000, func(_ int, s *Service) {
			s.Ports = nil
			for p := range 100 {
				s.Ports = append(s.Ports, Port{Name: fmt.Sprintf("p%d", p), Protocol: corev1.ProtocolTCP, Port: int32(1 + p)})
			}
		}),
	}
}

// decodeCost measures what decoding data costs: the heap the decoded set
// keeps, and the bytes allocated meanwhile.
func decodeCost(t *testing.T, data []byte) (set Set, kept, allocated uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	set, _, err := Decode(data, DefaultLimits, t0)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(set)
	return set, after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc), after.TotalAlloc - before.TotalAlloc
}

// TestDecodeMemory: the worst sets a peer may send within the default
// limits cost the controller a bounded heap to decode and to keep. The
// bound is the one docs/services.md states.
func TestDecodeMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap of large sets")
	}
	const keptBound, allocBound = 16 << 20, 48 << 20
	for name, services := range worstSets() {
		data, rejected, err := EncodeWithin(setOf(services), DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		set, kept, allocated := decodeCost(t, data)
		t.Logf("%s: %d services taken (%d left out), %d KiB stored: keeps %.1f MiB, allocates %.1f MiB to decode",
			name, len(set), len(rejected), len(data)>>10, float64(kept)/(1<<20), float64(allocated)/(1<<20))
		if kept > keptBound || allocated > allocBound {
			t.Errorf("%s: keeps %d bytes, allocates %d: over the bounds %d and %d", name, kept, allocated, keptBound, allocBound)
		}
	}
}

// TestParseLimits: limits read back as they are written; the fields not
// named take the defaults; an unknown field or a value below 1 is an error
// naming it.
func TestParseLimits(t *testing.T) {
	l := Limits{Services: 5, Endpoints: 6, EndpointGroups: 7, MetadataBytes: 8, TotalEndpoints: 9, TotalEndpointGroups: 10,
		TotalMetadataBytes: 11, DocumentBytes: 12, EncodedBytes: 13}
	if got, err := ParseLimits(l.String()); err != nil || got != l {
		t.Errorf("%q reads back as %+v (%v)", l.String(), got, err)
	}
	want := DefaultLimits
	want.TotalEndpoints = 100000
	if got, err := ParseLimits(" total-endpoints=100000 ,"); err != nil || got != want {
		t.Errorf("one field: %+v (%v), want %+v", got, err, want)
	}
	if got, err := ParseLimits(""); err != nil || got != DefaultLimits {
		t.Errorf("empty: %+v (%v), want the defaults", got, err)
	}
	for s, field := range map[string]string{"servics=1": "servics", "services=0": "services", "endpoints=x": "endpoints", "services": "services"} {
		if _, err := ParseLimits(s); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v, want one naming %s", s, err, field)
		}
	}
}
