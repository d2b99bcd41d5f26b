package mcs

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// fuzzLimits are small, so that the fuzzer reaches each of them.
var fuzzLimits = Limits{Services: 4, Endpoints: 4, EndpointGroups: 3, MetadataBytes: 64, TotalEndpoints: 6,
	TotalEndpointGroups: 4, TotalMetadataBytes: 100, DocumentBytes: 4096, EncodedBytes: 2048}

// fuzzSeeds are documents at and past each limit of fuzzLimits.
var fuzzSeeds = []string{
	`{"version":1,"services":[]}`,
	`{"version":1,"services":[{"namespace":"a","name":"a","exported":"2023-11-14T22:13:20Z","type":"ClusterSetIP","ports":[{"protocol":"TCP","port":80}]}]}`,
	// Five services: one past the limit of services.
	`{"version":1,"services":[` +
		`{"namespace":"a","name":"a","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[]},` +
		`{"namespace":"a","name":"b","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[]},` +
		`{"namespace":"a","name":"c","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[]},` +
		`{"namespace":"a","name":"d","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[]},` +
		`{"namespace":"a","name":"e","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[]}]}`,
	// Groups: three in one (at the limit), two more past the total.
	`{"version":1,"services":[` +
		`{"namespace":"a","name":"a","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[],"endpoints":[{},{},{}]},` +
		`{"namespace":"a","name":"b","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[],"endpoints":[{},{}]},` +
		`{"namespace":"a","name":"c","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[],"endpoints":[{},{},{},{}]}]}`,
	// Endpoints: four in one (at the limit), three more past the total.
	`{"version":1,"services":[` +
		`{"namespace":"a","name":"a","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[],"endpoints":[{"ports":[],"endpoints":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"},{"ip":"10.0.0.3"},{"ip":"10.0.0.4","hostname":"h"}]}]},` +
		`{"namespace":"a","name":"b","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[],"endpoints":[{"ports":[],"endpoints":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"},{"ip":"10.0.0.3"}]}]}]}`,
	// Metadata: 64 bytes in one, then past the total.
	`{"version":1,"services":[` +
		`{"namespace":"a","name":"a","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[],"annotations":{"k":"` + string(bytes.Repeat([]byte("v"), 63)) + `"}},` +
		`{"namespace":"a","name":"b","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[],"labels":{"k":"` + string(bytes.Repeat([]byte("v"), 40)) + `"}}]}`,
	// Out of order, repeated, of the wrong shape, in the future.
	`{"version":1,"services":[{"namespace":"a","name":"b","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[]},` +
		`{"namespace":"a","name":"a","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[]},` +
		`{"namespace":"a","name":"b","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[]},{"name":7},` +
		`{"namespace":"a","name":"c","exported":"2999-01-01T00:00:00Z","type":"Headless","ports":[]}]}`,
	// Fields a Service would be refused for.
	`{"version":1,"services":[{"namespace":"a","name":"a","exported":"2023-11-14T22:13:20Z","type":"ClusterSetIP","ports":[{"protocol":"TCP","port":80,"appProtocol":"-x"}],` +
		`"sessionAffinity":"None","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":0}},"trafficDistribution":"Far","ipFamilies":["IPv4","IPv4"]}]}`,
	`{"version":2}`,
	`{"version":1,"services":[` + string(bytes.Repeat([]byte(" "), 5000)) + `]}`,
}

// FuzzDecode feeds Decode whatever a stored set may hold: it never panics,
// keeps only services that validate, within every total of the limits,
// and refuses a whole document only with a rule.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), true)
	}
	f.Add([]byte("not gzip"), false)
	now := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, data []byte, compress bool) {
		if compress {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(data)
			_ = zw.Close()
			data = buf.Bytes()
		}
		set, rejected, err := Decode(data, fuzzLimits, now)
		if err != nil {
			var re *RuleError
			if !errors.As(err, &re) || set != nil {
				t.Fatalf("refusal %v is not a rule, or came with a set", err)
			}
			return
		}
		if len(rejected) > fuzzLimits.Services {
			t.Fatalf("%d services rejected and the set taken", len(rejected))
		}
		tally := NewTally(fuzzLimits)
		for k, s := range set {
			if err := s.Validate(fuzzLimits, now); err != nil {
				t.Fatalf("kept an invalid service: %v", err)
			}
			b, _ := json.Marshal(&s)
			if err := tally.Add(k, CostOf(&s, len(b))); err != nil && RuleOf(err) != RuleDocumentBytes {
				// The stored JSON may be shorter than what Marshal writes
				// (normalized defaults); every other total is exact.
				t.Fatalf("the kept set is over a total: %v", err)
			}
		}
		// What is kept stores within the bounds, and reads back whole.
		stored, trimmed, err := EncodeWithin(set, fuzzLimits)
		if err != nil {
			t.Fatal(err)
		}
		again, rejected, err := Decode(stored, fuzzLimits, now)
		if err != nil || len(rejected) != 0 || len(again) != len(set)-len(trimmed) {
			t.Fatalf("stored again: %d of %d services (%d trimmed), rejected %v, %v", len(again), len(set), len(trimmed), rejected, err)
		}
	})
}

// FuzzMerge merges sets a peer may send (decoded from the input) with a
// local export of the same services: it never panics, the winner is the
// oldest member as this cluster observed it, a local export made before
// a peer's was seen is never beaten, and the import's ports are unique
// by name and by protocol and number, unnamed only when alone.
func FuzzMerge(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), int64(0))
	}
	now := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, doc []byte, seenOffset int64) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(doc)
		_ = zw.Close()
		peer, _, err := Decode(buf.Bytes(), fuzzLimits, now)
		if err != nil {
			return
		}
		local := Set{}
		for k, s := range peer {
			s.Seen = now.Add(time.Duration(seenOffset))
			peer[k] = s
			l := s
			l.Seen, l.Exported = time.Time{}, now
			l.Type = "ClusterSetIP"
			if len(l.Ports) == 0 {
				l.Ports = []Port{{Name: "x", Protocol: "TCP", Port: 1}}
			}
			local[k] = l
		}
		imports := Merge([]Source{{Cluster: "peer", Services: peer, Live: true}, {Cluster: "here", Services: local, Local: true}})
		for k, imp := range imports {
			if imp.Key != k || len(imp.Members) != 2 {
				t.Fatalf("import %v of %d members", imp.Key, len(imp.Members))
			}
			first := imp.Members[0]
			if first.Since().After(imp.Members[1].Since()) {
				t.Fatalf("%v: the younger export won", k)
			}
			if seenOffset >= 0 && !first.Local {
				t.Fatalf("%v: a peer's export seen at %v beat the local one made at %v", k, first.Service.Seen, now)
			}
			names := map[string]bool{}
			type number struct {
				protocol string
				port     int32
			}
			numbers := map[number]bool{}
			for _, p := range imp.Ports {
				n := number{string(p.Protocol), p.Port}
				if names[p.Name] || numbers[n] || (p.Name == "" && len(imp.Ports) > 1) {
					t.Fatalf("%v: ports %v", k, imp.Ports)
				}
				names[p.Name], numbers[n] = true, true
			}
		}
	})
}
