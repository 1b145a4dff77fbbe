package outbox

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A broker outage, as the relay sees it, is a batch in which every event
// failed and none permanently. The Publisher interface says nothing about
// the broker's health, so this is a heuristic, and a deliberately simple
// one: when the broker is down every send fails, whatever the event, while
// an event that the broker refuses on its own merits fails next to events
// that go through. An outage is not the events' fault, so an outage batch:
//
//   - does not count: the claim's attempt is taken back and nothing is
//     parked, however long the outage lasts (MaxAttempts counts the
//     failures of an event that others around it did not share);
//   - is released after a short relay-level backoff, the same for every row
//     (RetryBackoff doubling with each consecutive outage batch, capped at
//     OutageMaxBackoff), instead of the per-event one, which would keep the
//     backlog waiting up to RetryMaxBackoff after the broker returns;
//   - pauses the relay's claims for that backoff: every claim would fail the
//     same way, so the relay probes the broker with one batch per backoff.
//
// The first batch with any acknowledged event ends the outage. The price of
// the heuristic: an event that fails transiently while it is alone in its
// batches (a quiet system) is retried at the outage pace without counting,
// until it shares a batch with an event that goes through.
type outage struct {
	mu      sync.Mutex
	batches int       // consecutive outage batches, 0 when the broker is fine
	since   time.Time // when the current outage was detected
}

// isOutage reports whether every event of b failed, none permanently.
func (b *batch) isOutage() bool { return allTransient(b.errs) }

// anyAcknowledged reports whether the publisher acknowledged an event of b.
func (b *batch) anyAcknowledged() bool { return !allFailed(b.errs) }

// allTransient reports whether there are verdicts and every one is a
// transient failure.
func allTransient(errs []error) bool {
	if len(errs) == 0 {
		return false
	}
	for _, err := range errs {
		if err == nil || errors.Is(err, ErrPermanent) {
			return false
		}
	}
	return true
}

// allFailed reports whether no event was acknowledged.
func allFailed(errs []error) bool {
	for _, err := range errs {
		if err == nil {
			return false
		}
	}
	return len(errs) > 0
}

// brokerRefused records a publish of n events taken for a broker outage
// (the first starts the outage, the next acknowledgement ends it:
// brokerBack) and returns how long to wait before the next attempt:
// RetryBackoff doubled per consecutive outage publish, up to
// OutageMaxBackoff.
func (r *relayCore) brokerRefused(ctx context.Context, n int, err error) time.Duration {
	r.outage.mu.Lock()
	defer r.outage.mu.Unlock()
	r.outage.batches++
	r.metrics.outageBatches.Inc()
	// The shift is bounded so that it cannot overflow.
	backoff := min(r.cfg.RetryBackoff<<min(r.outage.batches-1, 20), r.cfg.OutageMaxBackoff)
	if r.outage.batches == 1 {
		r.outage.since = time.Now()
		r.metrics.brokerOutage.Set(1)
		r.log.WarnContext(ctx, "broker outage: every event of a publish failed; pausing, attempts not counted",
			"events", n, "pause", backoff, "error", err)
	} else {
		r.log.DebugContext(ctx, "broker still unavailable", "events", n, "pause", backoff,
			"outage_publishes", r.outage.batches, "error", err)
	}
	return backoff
}

// inOutage reports whether the last outage publish has not been followed by
// an acknowledgement yet.
func (r *relayCore) inOutage() bool {
	r.outage.mu.Lock()
	defer r.outage.mu.Unlock()
	return r.outage.batches > 0
}

// brokerBack ends the outage, if there is one: an event was acknowledged.
func (r *relayCore) brokerBack(ctx context.Context) {
	r.outage.mu.Lock()
	defer r.outage.mu.Unlock()
	if r.outage.batches == 0 {
		return
	}
	r.metrics.brokerOutage.Set(0)
	r.log.InfoContext(ctx, "broker outage over: events acknowledged again",
		"lasted", time.Since(r.outage.since).Round(time.Millisecond), "outage_batches", r.outage.batches)
	r.outage.batches = 0
}

// pause waits d, or until ctx ends; notifications do not cut it short.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
