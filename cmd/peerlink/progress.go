package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

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

// progress prints the lines of a long operation, in the form users know from
// the reference CLI: "INFO   (local) Gateway client correctly set up".
type progress struct {
	out io.Writer
	// scope is "local" or "remote" when a command works on two clusters.
	scope string
	// timeout bounds each wait.
	timeout time.Duration
}

func (p progress) with(scope string) progress {
	p.scope = scope
	return p
}

func (p progress) infof(format string, args ...any) {
	prefix := "INFO   "
	if p.scope != "" {
		prefix += "(" + p.scope + ") "
	}
	fmt.Fprintf(p.out, prefix+format+"\n", args...)
}

// checkFunc reads the cluster once: done tells whether the wait is over,
// state describes what was seen, for the progress lines and the timeout
// error.
type checkFunc func(ctx context.Context) (done bool, state string, err error)

// wait polls check until it is done, printing what it waits for, a line
// every reportInterval with the elapsed time, and the final state. It gives
// up after p.timeout with an error naming what was awaited and the last
// state seen; an error of check ends it at once.
func (p progress) wait(ctx context.Context, what string, check checkFunc) (string, error) {
	start := time.Now()
	// The timeout bounds the polling, not each read: a read started just
	// before the deadline completes, and an error from it is a real one.
	pollCtx, cancel := context.WithTimeout(ctx, p.timeout)
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
			p.infof("Waiting for %s: %s", what, state)
			reported = true
		} else if time.Since(lastReport) >= reportInterval {
			p.infof("Still waiting for %s after %s: %s", what, elapsed(start), state)
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
		return state, fmt.Errorf("timed out after %s waiting for %s (--timeout): last seen: %s", p.timeout, what, state)
	}
	return state, err
}

func elapsed(start time.Time) string {
	return time.Since(start).Round(100 * time.Millisecond).String()
}

// readyState reads the kstatus conditions of an object: it is ready when
// its status describes the current generation and Ready is True.
func readyState(u *unstructured.Unstructured) (bool, string) {
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
