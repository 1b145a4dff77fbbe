package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// aggKey names an aggregate.
type aggKey struct{ typ, id string }

var (
	errLeaseLost = errors.New("the reader lease was lost: publishing stopped")
	errStopping  = errors.New("stopping: the batch is left to the next reader")
)

// resolve publishes events (in commit order) until each is acknowledged or
// parked, and returns nil then. Per-aggregate order: an ordered event is
// sent only after its aggregate's earlier events in the batch were
// acknowledged (the batch goes out in waves: the first event of each
// aggregate, then the second, …), and a failed event is retried, with
// backoff, before anything after it. An aggregate whose event is parked has
// its later events parked too (parked is the set of such aggregates). It
// gives up when the lease is lost (at once) or when the reader stops
// (drain: after the attempt in progress); the batch is then not confirmed.
func (r *WALRelay) resolve(lctx, drain context.Context, events []walEvent, parked map[aggKey]bool) error {
	if len(events) == 0 {
		return nil
	}
	wave := make([]int, len(events))
	waves := 1
	var seen map[aggKey]int
	for i := range events {
		e := &events[i].event
		if e.Sequence == 0 {
			continue
		}
		if seen == nil {
			seen = make(map[aggKey]int, len(events))
		}
		k := aggKey{e.AggregateType, e.AggregateID}
		wave[i] = seen[k]
		seen[k]++
		waves = max(waves, wave[i]+1)
	}
	idx := make([]int, 0, len(events))
	for w := range waves {
		idx = idx[:0]
		for i := range events {
			if wave[i] != w {
				continue
			}
			ev := &events[i]
			switch {
			case ev.err != nil:
				r.park(ev, ev.err, parked)
			case ev.event.Sequence > 0 && parked[aggKey{ev.event.AggregateType, ev.event.AggregateID}]:
				r.park(ev, fmt.Errorf("%w: an earlier event of %s %s is parked", ErrPermanent, ev.event.AggregateType, ev.event.AggregateID), parked)
			case ev.event.Sequence > 0 && r.held.blocks(heldKey(ev)):
				// Behind an event held aside: it waits, in order (walheld.go).
				ev.held = true
				r.held.hold(heldKey(ev), &heldEvent{id: ev.id, xid: ev.xid})
			default:
				idx = append(idx, i)
			}
		}
		if err := r.publishAll(lctx, drain, events, idx, parked); err != nil {
			return err
		}
	}
	return nil
}

// publishAll publishes events[idx] (one wave of a batch, sent for the first
// time) and retries the failed ones until each is acknowledged or parked.
// Each publish is traced as the polling relay's is (tracePublish).
//
// A publish in which every event failed, none permanently, is taken for a
// broker outage when it is the first send of two events or more (the
// broker refused all of them at once), or when the broker has acknowledged
// nothing since the last such publish. An outage is not the events' fault:
// their attempts are not counted, and they are retried after RetryBackoff
// doubling per outage publish up to OutageMaxBackoff. Any other failure is
// the event's own — an event retried alone after the events sent with it
// went through, or a lone event sent while the broker was acknowledging —
// and is counted as in the polling relay: retried after RetryBackoff
// doubling per attempt up to RetryMaxBackoff, parked at MaxAttempts, after
// which the stream moves on. The price: a broker outage that begins
// right before a lone event is sent, or after part of a wave was
// acknowledged, is taken for those events' own failure (they are counted,
// and parked if the outage outlasts their MaxAttempts); the publishes
// after them see the outage.
func (r *WALRelay) publishAll(lctx, drain context.Context, events []walEvent, idx []int, parked map[aggKey]bool) error {
	batch := make([]Event, 0, len(idx))
	for first := true; len(idx) > 0; first = false {
		if lctx.Err() != nil {
			return errLeaseLost
		}
		batch = batch[:0]
		for _, i := range idx {
			batch = append(batch, events[i].event)
		}
		errs := r.publishTraced(lctx, batch)
		if lctx.Err() != nil {
			return errLeaseLost
		}
		if errs == nil {
			r.brokerBack(lctx)
			return nil
		}
		var retry []int
		acked, permanent := 0, 0
		var firstErr error
		for k, i := range idx {
			switch err := errs[k]; {
			case err == nil:
				acked++
			case r.failed(err):
				permanent++
				r.park(&events[i], err, parked)
			default:
				firstErr = cmpOr(firstErr, err)
				retry = append(retry, i)
			}
		}
		if acked > 0 {
			r.brokerBack(lctx)
		}
		var backoff time.Duration
		if acked == 0 && permanent == 0 && (first && len(idx) > 1 || r.inOutage()) {
			backoff = r.brokerRefused(lctx, len(idx), firstErr)
		} else {
			// The events' own failures: counted, and held aside for a
			// retry with backoff (or parked after MaxAttempts) while the
			// stream moves on (walheld.go).
			now := time.Now()
			for _, i := range retry {
				ev := &events[i]
				ev.attempts++
				err := errs[indexOf(idx, i)]
				if r.cfg.MaxAttempts > 0 && ev.attempts >= r.cfg.MaxAttempts {
					r.park(ev, fmt.Errorf("%w: %d attempts failed, the last: %w", ErrPermanent, ev.attempts, err), parked)
					continue
				}
				ev.held, ev.holdErr = true, err
				r.held.hold(heldKey(ev), &heldEvent{id: ev.id, xid: ev.xid, attempts: ev.attempts, due: now.Add(r.retryBackoff(ev.attempts))})
				r.log.WarnContext(lctx, "an event failed on its own; holding it aside for a retry, the stream goes on",
					"outbox_id", ev.id, "event_id", ev.event.ID, "attempts", ev.attempts, "error", err)
			}
			retry = nil
		}
		if len(retry) == 0 {
			return nil
		}
		if drain.Err() != nil {
			return errStopping
		}
		select {
		case <-time.After(backoff):
		case <-lctx.Done():
			return errLeaseLost
		case <-drain.Done():
			return errStopping
		}
		idx = retry
	}
	return nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func indexOf(idx []int, i int) int {
	for k, v := range idx {
		if v == i {
			return k
		}
	}
	return 0
}

// park resolves an event by parking it (recorded with the batch's mark); an
// ordered event's aggregate is parked from then on.
func (r *WALRelay) park(ev *walEvent, err error, parked map[aggKey]bool) {
	ev.parked, ev.err = true, err
	if ev.event.Sequence > 0 {
		parked[aggKey{ev.event.AggregateType, ev.event.AggregateID}] = true
	}
	r.log.Warn("parking an event that cannot be published", "outbox_id", ev.id, "event_id", ev.event.ID, "error", err)
}

// markWithRetry records a resolved batch (see mark), retrying while the
// lease is held and the reader runs; after that, one attempt is made.
func (r *WALRelay) markWithRetry(lctx, drain context.Context, events []walEvent) error {
	backoff := r.cfg.RetryBackoff
	for {
		err := r.mark(lctx, events)
		if err == nil {
			return nil
		}
		r.metrics.relayErrors.Inc()
		if lctx.Err() != nil || drain.Err() != nil {
			return err
		}
		r.log.ErrorContext(lctx, "recording a batch failed; retrying", "events", len(events), "error", err)
		select {
		case <-time.After(backoff):
		case <-lctx.Done():
			return err
		case <-drain.Done():
		}
		backoff = min(2*backoff, r.cfg.OutageMaxBackoff)
	}
}

// mark records a resolved batch: one DELETE removes the acknowledged
// events (or, with WALConfig.KeepDispatched, one UPDATE sets their
// dispatched_at), and one more statement parks the parked ones. A mark that
// follows a lost lease is still correct (those events were acknowledged).
//
// A streamed transaction may not be visible yet (see awaitVisible): when the
// statement records fewer rows than the batch has events, the relay waits
// until every transaction of the batch is visible and records the rest. Rows
// still missing then were recorded already (by a reader whose position was
// not confirmed before it stopped).
func (r *WALRelay) mark(ctx context.Context, events []walEvent) error {
	if len(events) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LeaseTTL/4)
	defer cancel()
	ids := make([]int64, 0, len(events))
	var parkIDs []int64
	var parkErrs []string
	var failedIDs []int64
	var failedErrs []string
	for i := range events {
		switch {
		case events[i].parked:
			parkIDs = append(parkIDs, events[i].id)
			parkErrs = append(parkErrs, events[i].err.Error())
		case events[i].held:
			if events[i].holdErr != nil {
				failedIDs = append(failedIDs, events[i].id)
				failedErrs = append(failedErrs, events[i].holdErr.Error())
			}
		default:
			ids = append(ids, events[i].id)
		}
	}
	xids := transactionsOf(events)
	visible := len(xids) == 0 // every transaction of the batch is known to be visible
	if len(ids) > 0 {
		var marked int64
		var at time.Time
		for {
			res, err := r.record(ctx, ids)
			if err != nil {
				return fmt.Errorf("marking %d events dispatched: %w", len(ids), err)
			}
			marked, at = marked+res.Marked, res.MarkedAt
			if marked >= int64(len(ids)) || visible {
				break
			}
			if err := r.awaitVisible(ctx, xids); err != nil {
				return err
			}
			visible = true
		}
		r.metrics.published.Add(float64(marked))
		for i := range events {
			if !events[i].parked && !events[i].held {
				r.metrics.publishLatency.Observe(at.Sub(events[i].createdAt).Seconds())
			}
		}
	}
	if len(failedIDs) > 0 {
		if !visible {
			if err := r.awaitVisible(ctx, xids); err != nil {
				return err
			}
			visible = true
		}
		if _, err := r.queries.RecordFailedAttempts(ctx, outboxdb.RecordFailedAttemptsParams{Ids: failedIDs, Errors: failedErrs}); err != nil {
			return fmt.Errorf("counting the attempts of %d held events: %w", len(failedIDs), err)
		}
	}
	if len(parkIDs) > 0 {
		if !visible {
			if err := r.awaitVisible(ctx, xids); err != nil {
				return err
			}
		}
		n, err := r.queries.ParkEvents(ctx, outboxdb.ParkEventsParams{Ids: parkIDs, Errors: parkErrs})
		if err != nil {
			return fmt.Errorf("parking %d events: %w", len(parkIDs), err)
		}
		r.metrics.parkedTotal.Add(float64(n))
	}
	return nil
}

// record deletes the acknowledged events' rows, or marks them dispatched.
func (r *WALRelay) record(ctx context.Context, ids []int64) (outboxdb.MarkDispatchedRow, error) {
	if !r.cfg.DeleteDispatched {
		return r.records.MarkDispatched(ctx, ids)
	}
	d, err := r.records.DeletePublished(ctx, ids)
	return outboxdb.MarkDispatchedRow(d), err
}

// transactionsOf lists the streamed transactions of events (consecutive
// events of one transaction are adjacent).
func transactionsOf(events []walEvent) []int64 {
	var xids []int64
	for i := range events {
		if x := int64(events[i].xid); x != 0 && (len(xids) == 0 || xids[len(xids)-1] != x) {
			xids = append(xids, x)
		}
	}
	return xids
}

// awaitVisible waits until every transaction in xids is visible to new
// snapshots. PostgreSQL streams a commit once its WAL record is flushed; the
// committing backend makes it visible a moment later, after synchronous
// standbys confirmed it when synchronous replication is on. Its events may
// be published in between (the commit is durable), but its rows cannot be
// recorded until then, and the position must not be confirmed before they
// are: the rows would stay pending for good.
func (r *WALRelay) awaitVisible(ctx context.Context, xids []int64) error {
	wait, counted := time.Millisecond, false
	for {
		n, err := r.queries.InvisibleTransactions(ctx, xids)
		if err != nil {
			return fmt.Errorf("checking that %d streamed transactions are visible: %w", len(xids), err)
		}
		if n == 0 {
			return nil
		}
		if !counted {
			r.wal.invisibleWaits.Inc()
			counted = true
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("%d streamed transactions are committed but not yet visible (synchronous standbys not answering?): %w", n, ctx.Err())
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// parkedAggregates loads the aggregates that have a parked ordered event.
func (r *WALRelay) parkedAggregates(ctx context.Context) (map[aggKey]bool, error) {
	rows, err := r.queries.ParkedAggregates(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the parked aggregates: %w", err)
	}
	parked := make(map[aggKey]bool, len(rows))
	for _, row := range rows {
		parked[aggKey{row.AggregateType, row.AggregateID}] = true
	}
	return parked, nil
}

// handover publishes the events that were pending when the slot was
// created (bounded by the reader row's hand-over id and time), which the
// slot's stream does not contain, in id order, a batch at a time, before
// the reader streams. What it published is dispatched, so a reader that
// starts later finds nothing left to hand over.
func (r *WALRelay) handover(ctx, lctx context.Context, maxID int64, before time.Time, parked map[aggKey]bool) error {
	if maxID == 0 {
		return nil
	}
	after, total := int64(0), 0
	for {
		rows, err := r.queries.WALHandoverEvents(lctx, outboxdb.WALHandoverEventsParams{
			AfterID: after, MaxID: maxID, CreatedBefore: before, BatchSize: int32(r.cfg.BatchSize),
		})
		if err != nil {
			return fmt.Errorf("reading the events to hand over: %w", err)
		}
		if len(rows) == 0 {
			break
		}
		events := make([]walEvent, len(rows))
		for i, x := range rows {
			events[i] = walEventFromHandover(x)
		}
		r.metrics.batchSize.Observe(float64(len(events)))
		if err := r.guard.wait(lctx, ctx, 0, true); err != nil {
			return err
		}
		if err := r.resolve(lctx, ctx, events, parked); err != nil {
			return err
		}
		if err := r.markWithRetry(lctx, ctx, events); err != nil {
			return err
		}
		after, total = rows[len(rows)-1].ID, total+len(rows)
	}
	if total > 0 {
		r.log.InfoContext(ctx, "handed over the events committed before the slot existed", "events", total)
	}
	return nil
}
