package peering

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// Intervals of waits: how often the cluster is read, and how often a wait
// that takes long says it is still waiting.
const (
	pollInterval   = 500 * time.Millisecond
	reportInterval = 5 * time.Second
)

// Progress prints the lines of a long operation, in the form users know from
// the reference CLI: "INFO   (local) Gateway client correctly set up".
type Progress struct {
	Out io.Writer
	// Scope is "local" or "remote" when a command works on two clusters.
	Scope string
	// Timeout bounds each wait.
	Timeout time.Duration
	// TimeoutName, when set, names Timeout in the error of a wait that runs
	// out, as the caller calls it (the CLI's --timeout).
	TimeoutName string
}

// With returns p for one of two clusters.
func (p Progress) With(scope string) Progress {
	p.Scope = scope
	return p
}

// Infof prints one line.
func (p Progress) Infof(format string, args ...any) {
	prefix := "INFO   "
	if p.Scope != "" {
		prefix += "(" + p.Scope + ") "
	}
	fmt.Fprintf(p.Out, prefix+format+"\n", args...)
}

// CheckFunc reads the cluster once: done tells whether the wait is over,
// state describes what was seen, for the Progress lines and the timeout
// error.
type CheckFunc func(ctx context.Context) (done bool, state string, err error)

// Wait polls check until it is done, printing what it waits for, a line
// every reportInterval with the elapsed time, and the final state. It gives
// up after p.Timeout with an error naming what was awaited and the last
// state seen; an error of check ends it at once.
func (p Progress) Wait(ctx context.Context, what string, check CheckFunc) (string, error) {
	start := time.Now()
	// The timeout bounds the polling, not each read: a read started just
	// before the deadline completes, and an error from it is a real one.
	pollCtx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	lastReport := start
	reported := false
	var state string
	err := wait.PollUntilContextCancel(pollCtx, pollInterval, true, func(context.Context) (bool, error) {
		done, s, err := check(ctx)
		if err != nil {
			return false, err
		}
		state = s
		if done {
			return true, nil
		}
		if !reported {
			p.Infof("Waiting for %s: %s", what, state)
			reported = true
		} else if time.Since(lastReport) >= reportInterval {
			p.Infof("Still waiting for %s after %s: %s", what, elapsed(start), state)
			lastReport = time.Now()
		}
		return false, nil
	})
	switch {
	case err == nil:
		return state, nil
	case ctx.Err() != nil:
		return state, fmt.Errorf("interrupted while waiting for %s: run the command again to resume", what)
	case errors.Is(pollCtx.Err(), context.DeadlineExceeded) && wait.Interrupted(err):
		name := ""
		if p.TimeoutName != "" {
			name = " (" + p.TimeoutName + ")"
		}
		return state, fmt.Errorf("timed out after %s waiting for %s%s: last seen: %s", p.Timeout, what, name, state)
	}
	return state, err
}

func elapsed(start time.Time) string {
	return time.Since(start).Round(100 * time.Millisecond).String()
}

// ReadyState reads the kstatus conditions of an object: it is ready when
// its status describes the current generation and Ready is True.
func ReadyState(u *unstructured.Unstructured) (bool, string) {
	gen := u.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed < gen {
		return false, fmt.Sprintf("generation %d not observed yet by the controller", gen)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if !ok || cm["type"] != netv1beta1.ConditionReady {
			continue
		}
		status, _ := cm["status"].(string)
		reason, _ := cm["reason"].(string)
		msg, _ := cm["message"].(string)
		state := fmt.Sprintf("Ready=%s %s", status, reason)
		if msg != "" {
			state += ": " + msg
		}
		return status == "True", state
	}
	return false, "no Ready condition yet"
}

// ConditionState summarises the Ready condition for the current generation.
func ConditionState(generation int64, s netv1beta1.CommonStatus) (bool, string) {
	if s.ObservedGeneration < generation {
		return false, "not reconciled yet"
	}
	c := meta.FindStatusCondition(s.Conditions, netv1beta1.ConditionReady)
	if c == nil {
		return false, "no Ready condition yet"
	}
	state := c.Reason
	if c.Message != "" {
		state += ": " + c.Message
	}
	return c.Status == "True", state
}
