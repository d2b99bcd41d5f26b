package resync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Trigger asks for a sync. Requests made while one is pending are folded
// into it.
type Trigger chan struct{}

// NewTrigger returns a trigger with nothing pending.
func NewTrigger() Trigger { return make(Trigger, 1) }

// Notify asks for a sync without blocking.
func (t Trigger) Notify() {
	select {
	case t <- struct{}{}:
	default:
	}
}

// Tick pulls t at once and then every interval until ctx ends: the resync
// that catches what no watch announces (nftables edits, a lost
// notification).
func Tick(ctx context.Context, t Trigger, interval time.Duration) {
	t.Notify()
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				t.Notify()
			}
		}
	}()
}

// WatchObjects pulls t on every add, update and delete of the kinds of
// objs, through informers.
func WatchObjects(ctx context.Context, informers cache.Informers, t Trigger, objs ...client.Object) error {
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { t.Notify() },
		UpdateFunc: func(any, any) { t.Notify() },
		DeleteFunc: func(any) { t.Notify() },
	}
	for _, obj := range objs {
		inf, err := informers.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watch %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch %T: %w", obj, err)
		}
	}
	return nil
}

// WatchKernel pulls t whenever a link or route of the current network
// namespace changes, until ctx ends, so that a link or route deleted by
// hand comes back at once. Without notifications (the subscription
// failed) it logs why and leaves the work to the caller's resync interval,
// which also catches what netlink does not announce (nftables edits).
func WatchKernel(ctx context.Context, log logr.Logger, t Trigger) {
	links := make(chan netlink.LinkUpdate, 64)
	routes := make(chan netlink.RouteUpdate, 256)
	onErr := func(err error) { log.V(1).Info("netlink subscription", "error", err.Error()) }
	if err := netlink.LinkSubscribeWithOptions(links, ctx.Done(), netlink.LinkSubscribeOptions{ErrorCallback: onErr}); err != nil {
		log.Info("no link notifications; relying on the resync interval", "error", err.Error())
	}
	if err := netlink.RouteSubscribeWithOptions(routes, ctx.Done(), netlink.RouteSubscribeOptions{ErrorCallback: onErr}); err != nil {
		log.Info("no route notifications; relying on the resync interval", "error", err.Error())
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-links:
				if !ok {
					return
				}
			case _, ok := <-routes:
				if !ok {
					return
				}
			}
			t.Notify()
		}
	}()
}

// Waiting is the error of a sync that found a fact missing (a key not
// written yet, an object not created yet): nothing is configured and the
// next change brings another try. It is not logged as a failure.
type Waiting struct{ Reason string }

func (w Waiting) Error() string { return "waiting: " + w.Reason }

// IsWaiting reports whether err is, or wraps, a Waiting.
func IsWaiting(err error) bool {
	var w Waiting
	return errors.As(err, &w)
}

// Outcome records how the last sync ended. Its methods are safe to call
// from the readiness check's goroutine while the loop records.
type Outcome struct {
	log logr.Logger
	// waitMsg and failMsg are the log messages of a sync that waits and of
	// one that fails.
	waitMsg, failMsg string

	// waitReason and lastError are the last reasons logged, touched only by
	// the loop's goroutine.
	waitReason, lastError string

	mu       sync.Mutex
	notReady error
}

// NewOutcome returns an outcome, not ready until the first sync succeeds,
// that logs a wait with waitMsg and a failure with failMsg.
func NewOutcome(log logr.Logger, waitMsg, failMsg string) *Outcome {
	return &Outcome{log: log, waitMsg: waitMsg, failMsg: failMsg, notReady: errors.New("starting")}
}

// Record takes the error of a sync (nil: it succeeded). A wait or failure
// is logged when its reason differs from the last one logged, so that a
// loop retrying every second logs each new reason once.
func (o *Outcome) Record(err error) {
	switch {
	case err == nil:
		o.waitReason, o.lastError = "", ""
	case IsWaiting(err):
		if err.Error() != o.waitReason {
			o.log.Info(o.waitMsg, "reason", err.Error())
			o.waitReason = err.Error()
		}
	default:
		if err.Error() != o.lastError {
			o.log.Error(err, o.failMsg)
			o.lastError = err.Error()
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.notReady = err
}

// Ready is a readiness check: the last sync succeeded.
func (o *Outcome) Ready(*http.Request) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.notReady
}
