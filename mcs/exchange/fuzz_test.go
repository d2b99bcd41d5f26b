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
	f.Add(append(frameBytes([]byte(`{"type":"upsert","service":{"namespace":"a","name":"b","type":"ClusterSetIP","ports":[{"protocol":"TCP","port":80}],"endpoints":[{"ports":[],"endpoints":[{"ip":"10.0.0.1","ready":true}]}]}}`)),
		frameBytes([]byte(`{"type":"synced"}`))...))
	f.Add(frameBytes([]byte(`{"type":"delete","key":{"namespace":"a","name":"b"}}`)))
	f.Add([]byte{0, 0, 0, 5, '{', '}', '}', '}', '}'})
	limits := mcs.Limits{Services: 5, Endpoints: 5}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := New(Options{Limits: limits, Timeout: 200 * time.Millisecond, MaxFrame: 4096, Log: logr.Discard(),
			OnPeer: func(set mcs.Set, _ []mcs.Rejected) {
				if len(set) > limits.Services {
					t.Fatalf("delivered %d services, over the limit", len(set))
				}
				for _, s := range set {
					if err := s.Validate(limits); err != nil {
						t.Fatalf("delivered an invalid service: %v", err)
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
