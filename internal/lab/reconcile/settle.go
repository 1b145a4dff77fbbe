package reconcile

import (
	"context"
	"fmt"
	"reflect"
	"time"
)

// Settle checks until the pipeline has settled, or until timeout, and
// returns the last report. Settled means nothing pending in the outbox and
// the same report for `quiet` when every committed effect has arrived, or for
// 4 × quiet when some are still missing (a consumer that crashed may need
// its group's session timeout to pass before it consumes again). A run whose
// events are lost settles with the loss in it. The databases are polled; the
// topic, which only grows, is read once, when the databases have settled.
func Settle(parent context.Context, src Sources, timeout, quiet time.Duration) (Report, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	var (
		last        Report
		stableSince time.Time
	)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := checkDatabases(ctx, src)
		var pending int
		if err == nil {
			pending, err = outboxPending(ctx, src.OrdersURL)
		}
		if err != nil {
			// A server just restarted (a broker's stale metadata, a database
			// still starting) is retried until the deadline.
			if ctx.Err() != nil {
				return last, fmt.Errorf("settling: %w", err)
			}
			stableSince = time.Time{}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
			continue
		}
		switch {
		case pending > 0 || !reflect.DeepEqual(r, last) || stableSince.IsZero():
			stableSince = time.Now()
		case time.Since(stableSince) >= quiet && r.Ledger.Lost == 0 && r.Notifications.Lost == 0,
			time.Since(stableSince) >= 4*quiet:
			return r, settleWire(ctx, src, &r, tick)
		}
		last = r
		select {
		case <-ctx.Done():
			// Not settled in time: report what is there, topic included.
			wctx, wcancel := context.WithTimeout(parent, 30*time.Second)
			defer wcancel()
			return last, settleWire(wctx, src, &last, tick)
		case <-tick.C:
		}
	}
}

// settleWire reads the topic into r, retrying while a broker that just
// restarted still serves stale metadata, until ctx ends.
func settleWire(ctx context.Context, src Sources, r *Report, tick *time.Ticker) error {
	for {
		err := addWire(ctx, src, r)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("reading the topic: %w", err)
		case <-tick.C:
		}
	}
}

// outboxPending counts undispatched, unparked outbox rows (0 where the
// orders database has no outbox rows, as in naive mode).
func outboxPending(ctx context.Context, dbURL string) (int, error) {
	rows, err := query(ctx, dbURL, `SELECT count(*)::text FROM outbox WHERE dispatched_at IS NULL AND parked_at IS NULL`)
	if err != nil {
		return 0, err
	}
	var n int
	if len(rows) == 1 {
		_, _ = fmt.Sscan(rows[0][0], &n)
	}
	return n, nil
}
