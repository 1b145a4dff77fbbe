package reconcile

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// pollInterval is how often Settle reads the databases.
const pollInterval = 500 * time.Millisecond

// Settle checks until the pipeline has settled, or until timeout, and
// returns the last report. Settled means the same report for `quiet` when
// every committed effect has arrived and the outbox is empty, or for
// 4 × quiet when some effects are still missing (a consumer that crashed
// may need its group's session timeout to pass before it consumes again) or
// outbox rows are still pending. No report is settled while pending rows
// will still move by themselves — a relay leased them, they wait out a
// retry backoff, or a WAL relay is about to take over a slot whose reader
// is gone; rows that stay pending otherwise that long never will, and the
// report counts them (Report.Outbox). A run whose events are lost
// settles with the loss in it. The databases are polled; the topic, which
// only grows, is read once, when the databases have settled.
//
// A read that fails transiently (a name that does not resolve, a refused or
// reset connection, a timeout; see transient) is retried, with a growing
// pause, until the deadline; the error then names the last failure. Any
// other error (an authentication failure, a SQL error) ends Settle at once.
// A deadline that passes while the reads succeed is not an error: the
// report is what was there, with Settled false.
func Settle(parent context.Context, src Sources, timeout, quiet time.Duration) (Report, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	var (
		last        Report
		read        bool // last holds a report
		stableSince time.Time
	)
	for {
		var r Report
		err := retry(ctx, dbAttemptTimeout, func(ctx context.Context) (err error) {
			r, err = checkDatabases(ctx, src)
			return err
		})
		var failed *retriesError
		switch {
		case errors.As(err, &failed):
			// The reads failed, transiently, until the deadline.
			return last, fmt.Errorf("settling: not settled within %s: %w", timeout, err)
		case err != nil && ctx.Err() == nil:
			return last, fmt.Errorf("settling: %w", err)
		case err != nil && !read:
			return last, fmt.Errorf("settling: nothing read within %s: %w", timeout, err)
		case err != nil:
			// The deadline came in the middle of a read: report the last.
		default:
			complete := r.Ledger.Lost == 0 && r.Notifications.Lost == 0 && r.Outbox.Pending == 0
			switch {
			case r.Outbox.moving() || !reflect.DeepEqual(r, last) || stableSince.IsZero():
				stableSince = time.Now()
			case time.Since(stableSince) >= quiet && complete, time.Since(stableSince) >= 4*quiet:
				r.Settled = true
				return r, settleWire(ctx, src, &r)
			}
			last, read = r, true
			sleep(ctx, pollInterval)
		}
		if ctx.Err() != nil {
			// Not settled in time: report what is there, topic included.
			wctx, wcancel := context.WithTimeout(parent, 30*time.Second)
			defer wcancel()
			return last, settleWire(wctx, src, &last)
		}
	}
}

// settleWire reads the topic into r, retrying while a broker that just
// restarted still serves stale metadata, until ctx ends.
func settleWire(ctx context.Context, src Sources, r *Report) error {
	if err := retry(ctx, 0, func(ctx context.Context) error { return addWire(ctx, src, r) }); err != nil {
		return fmt.Errorf("reading the topic: %w", err)
	}
	return nil
}
