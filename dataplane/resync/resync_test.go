package resync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
)

func TestTriggerFoldsRequests(t *testing.T) {
	tr := NewTrigger()
	for range 3 {
		tr.Notify()
	}
	<-tr
	select {
	case <-tr:
		t.Fatal("three requests made while one was pending gave two syncs")
	default:
	}
}

func TestTickPullsAtOnceAndThenEveryInterval(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tr := NewTrigger()
	Tick(ctx, tr, 10*time.Millisecond)
	select {
	case <-tr:
	default:
		t.Fatal("no sync at once")
	}
	for range 2 {
		select {
		case <-tr:
		case <-time.After(5 * time.Second):
			t.Fatal("no sync after an interval")
		}
	}
	cancel()
	// A tick may have been under way as ctx ended; then none comes.
	time.Sleep(50 * time.Millisecond)
	select {
	case <-tr:
	default:
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case <-tr:
		t.Error("a sync after ctx ended")
	default:
	}
}

func TestIsWaitingSeesWrappedWaits(t *testing.T) {
	w := Waiting{Reason: "no key yet"}
	if w.Error() != "waiting: no key yet" {
		t.Errorf("Error() = %q", w.Error())
	}
	if !IsWaiting(fmt.Errorf("read facts: %w", w)) {
		t.Error("a wrapped Waiting is not seen")
	}
	if IsWaiting(errors.New("waiting: a plain error")) {
		t.Error("a plain error that reads like a wait counts as one")
	}
}

func TestOutcomeLogsEachReasonOnceAndAnswersReadiness(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	o := NewOutcome(log, "not configuring yet", "sync; retrying")
	if o.Ready(nil) == nil {
		t.Fatal("ready before the first sync")
	}
	wait := Waiting{Reason: "no peer key"}
	fail := errors.New("netlink: permission denied")
	for _, err := range []error{wait, wait, wait, fail, fail, nil, nil, wait} {
		o.Record(err)
		if got := o.Ready(nil); !errors.Is(got, err) && got != err {
			t.Fatalf("after Record(%v), Ready = %v", err, got)
		}
	}
	// Wait, failure, and the wait again after a success: three lines.
	if len(lines) != 3 {
		t.Fatalf("logged %d lines, want 3:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i, want := range []string{"not configuring yet", "sync; retrying", "not configuring yet"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s, want %q in it", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[1], "permission denied") {
		t.Errorf("the failure line does not carry the error: %s", lines[1])
	}
}
