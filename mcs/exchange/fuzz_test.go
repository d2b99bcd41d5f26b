package exchange

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/peerlink/peerlink/mcs"
)

// FuzzReceive feeds a session whatever a hostile peer may send after its
// hello: the session ends or goes on, never panics, and delivers only
// services that pass validation, within the limits.
func FuzzReceive(f *testing.F) {
	f.Add(frameBytes([]byte(`{"type":"synced"}`)))
	f.Add(append(frameBytes([]byte(`{"type":"upsert","service":{"namespace":"a","name":"b","exported":"2023-11-14T22:13:20Z","type":"ClusterSetIP","ports":[{"protocol":"TCP","port":80}],"endpoints":[{"ports":[],"endpoints":[{"ip":"10.0.0.1","ready":true}]}]}}`)),
		frameBytes([]byte(`{"type":"synced"}`))...))
	f.Add(frameBytes([]byte(`{"type":"delete","key":{"namespace":"a","name":"b"}}`)))
	f.Add([]byte{0, 0, 0, 5, '{', '}', '}', '}', '}'})
	f.Add(append(frameBytes([]byte(`{"type":"upsert","service":{"namespace":"a","name":"c","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[],"endpoints":[{},{},{},{},{}]}}`)),
		frameBytes([]byte(`{"type":"upsert","service":{"namespace":"a","name":"d","exported":"2023-11-14T22:13:20Z","type":"Headless","ports":[],"endpoints":[{},{}]}}`))...))
	limits := mcs.Limits{Services: 5, Endpoints: 5, EndpointGroups: 5, TotalEndpoints: 8, TotalEndpointGroups: 6, MetadataBytes: 64, TotalMetadataBytes: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := New(Options{Limits: limits, Timeout: 200 * time.Millisecond, MaxFrame: 4096, Log: logr.Discard(),
			OnPeer: func(set mcs.Set, _ []mcs.Rejected) {
				if len(set) > limits.Services {
					t.Fatalf("delivered %d services, over the limit", len(set))
				}
				tally := mcs.NewTally(limits)
				for k, s := range set {
					if err := s.Validate(limits, time.Now()); err != nil {
						t.Fatalf("delivered an invalid service: %v", err)
					}
					if err := tally.Add(k, mcs.CostOf(&s, 0)); err != nil {
						t.Fatalf("delivered a set over a total: %v", err)
					}
				}
			}})
		a, b := net.Pipe()
		defer b.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = e.session(context.Background(), a)
		}()
		go discard(b)
		_, _ = b.Write(frameBytes([]byte(`{"type":"hello","version":1}`)))
		_, _ = b.Write(data)
		_ = b.Close()
		<-done
	})
}
