package gateway

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseRecord is a Lease lock that reads a fixed holder, or fails; it
// writes nothing.
type leaseRecord struct {
	resourcelock.Interface
	holder string
	err    error
}

func (l *leaseRecord) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if l.err != nil {
		return nil, nil, l.err
	}
	return &resourcelock.LeaderElectionRecord{HolderIdentity: l.holder}, nil, nil
}

// TestLeadership checks what the main loop asks of the election: a replica
// without one is active at once; a standby takes over once; an active
// replica steps down only when the Lease names another one, not when it
// names this one, names none or cannot be read; a standby never does. The
// active marker of a replica without an election only runs the sync.
func TestLeadership(t *testing.T) {
	ctx := context.Background()
	alone := newLeadership(nil, Options{}, nil, logr.Discard())
	if !alone.active.Load() || alone.takeOver() {
		t.Error("without an election: want active at once, and nothing to take over")
	}
	if err := alone.onReleased(); err != nil {
		t.Errorf("a release without an election: %v", err)
	}

	lock := &leaseRecord{holder: "other"}
	l := newLeadership(&Election{Lock: lock, PodName: "me"}, Options{}, nil, logr.Discard())
	if l.active.Load() || l.lost(ctx) {
		t.Error("a standby is active, or lost what it does not carry")
	}
	if !l.takeOver() || l.takeOver() || !l.active.Load() {
		t.Error("takeOver: want it to tell once that this replica became active")
	}
	for _, tc := range []struct {
		holder string
		err    error
		want   bool
	}{{"other", nil, true}, {"me", nil, false}, {"", nil, false}, {"other", errors.New("API server unreachable"), false}} {
		lock.holder, lock.err = tc.holder, tc.err
		if got := l.lost(ctx); got != tc.want {
			t.Errorf("Lease held by %q (read error %v): lost = %v, want %v", tc.holder, tc.err, got, tc.want)
		}
	}

	var m *activeMarker
	synced := false
	m.markWhile(ctx, true, func() { synced = true })
	if !synced {
		t.Error("without an election, markWhile did not run the sync")
	}
}
