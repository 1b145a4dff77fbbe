package outbox

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// An event that fails on its own (not in a broker outage) is held aside:
// the stream moves on, the event stays pending in the table, and the
// reader retries it with backoff, counting its attempts, until it is
// acknowledged or, after MaxAttempts, parked. Its aggregate's later events
// are held behind it and published in order once it is through (or parked
// with it), as the polling relay blocks only that order. Held events belong
// to the reader that holds the lease; after a takeover the next reader's
// sweep finds them pending behind its position and publishes them again.

// heldEvent is one event held aside.
type heldEvent struct {
	id       int64
	xid      uint32 // its transaction, while it may not be visible yet
	attempts int
	due      time.Time
}

// heldSet is the reader's held events, by aggregate, in order: only the
// first of an aggregate is retried. Unordered events are held alone.
type heldSet struct {
	mu   sync.Mutex
	aggs map[aggKey][]*heldEvent
	ids  map[int64]bool
}

func (h *heldSet) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.aggs, h.ids = map[aggKey][]*heldEvent{}, map[int64]bool{}
}

// heldKey is the key an event is held under: its aggregate if ordered,
// itself if not.
func heldKey(ev *walEvent) aggKey {
	if ev.event.Sequence > 0 {
		return aggKey{ev.event.AggregateType, ev.event.AggregateID}
	}
	return aggKey{"", "#" + strconv.FormatInt(ev.id, 10)}
}

// blocks reports whether ordered events of k must wait behind held ones.
func (h *heldSet) blocks(k aggKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.aggs[k]) > 0
}

// hold appends e to k's held events, once.
func (h *heldSet) hold(k aggKey, e *heldEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ids[e.id] {
		return
	}
	h.ids[e.id] = true
	h.aggs[k] = append(h.aggs[k], e)
}

func (h *heldSet) contains(id int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[id]
}

// due returns each aggregate's first held event whose retry is due.
func (h *heldSet) due(now time.Time) (keys []aggKey, heads []*heldEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, evs := range h.aggs {
		if len(evs) > 0 && !evs[0].due.After(now) {
			keys, heads = append(keys, k), append(heads, evs[0])
		}
	}
	return keys, heads
}

// pop removes k's first held event; the next, if any, is due at once.
func (h *heldSet) pop(k aggKey, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	evs := h.aggs[k]
	if len(evs) == 0 {
		return
	}
	delete(h.ids, evs[0].id)
	if evs = evs[1:]; len(evs) == 0 {
		delete(h.aggs, k)
		return
	}
	evs[0].due = now
	h.aggs[k] = evs
}

// drop removes all of k's held events and returns them.
func (h *heldSet) drop(k aggKey) []*heldEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	evs := h.aggs[k]
	delete(h.aggs, k)
	for _, e := range evs {
		delete(h.ids, e.id)
	}
	return evs
}

// retryBackoff is the wait after an event's attempts-th failure.
func (r *WALRelay) retryBackoff(attempts int) time.Duration {
	return min(r.cfg.RetryBackoff<<min(max(attempts-1, 0), 20), r.cfg.RetryMaxBackoff)
}

// retryHeld publishes the held events whose retry is due, reading them
// from the table: an acknowledged one is recorded and lets its aggregate's
// next held event go; a failed one is counted and held again with a longer
// backoff, or parked, with its aggregate's held events, after MaxAttempts.
func (r *WALRelay) retryHeld(lctx context.Context, parked map[aggKey]bool) error {
	// An acknowledged event makes the next of its aggregate due at once.
	for range 100 {
		acked, err := r.retryHeldOnce(lctx, parked)
		if err != nil || acked == 0 {
			return err
		}
	}
	return nil
}

// retryHeldOnce is one publish of the held events whose retry is due; it
// returns how many were acknowledged.
func (r *WALRelay) retryHeldOnce(lctx context.Context, parked map[aggKey]bool) (int, error) {
	keys, heads := r.held.due(time.Now())
	if len(heads) == 0 {
		return 0, nil
	}
	ids := make([]int64, len(heads))
	for i, e := range heads {
		ids[i] = e.id
	}
	rows, err := r.queries.WALSweepEvents(lctx, ids)
	if err != nil {
		return 0, fmt.Errorf("reading the held events: %w", err)
	}
	byID := make(map[int64]int, len(rows))
	for i, x := range rows {
		byID[x.ID] = i
	}
	var (
		batch []Event
		keyOf []int // index into keys/heads of each event in batch
	)
	for i, e := range heads {
		j, ok := byID[e.id]
		if !ok {
			if r.invisible(lctx, e.xid) {
				continue // committed, not visible yet: due again at once
			}
			r.held.pop(keys[i], time.Now()) // recorded or parked meanwhile
			continue
		}
		w := walEventFromHandover(outboxdb.WALHandoverEventsRow(rows[j]))
		batch, keyOf = append(batch, w.event), append(keyOf, i)
	}
	if len(batch) == 0 {
		return 0, nil
	}
	errs := r.publishTraced(lctx, batch)
	if lctx.Err() != nil {
		return 0, errLeaseLost
	}
	now := time.Now()
	if outage := errs != nil && allTransient(errs) && (len(batch) > 1 || r.inOutage()); outage {
		// The broker refuses everything: not the events' fault, as in
		// publishAll. Retried at the outage pace, attempts not counted.
		wait := r.brokerRefused(lctx, len(batch), errs[0])
		for _, i := range keyOf {
			heads[i].due = now.Add(wait)
		}
		return 0, nil
	}
	if errs == nil || len(errs) > 0 && !allFailed(errs) {
		r.brokerBack(lctx)
	}
	var (
		acked               []walEvent
		parkIDs, failedIDs  []int64
		parkErrs, failedErr []string
	)
	for n, i := range keyOf {
		k, e := keys[i], heads[i]
		var err error
		if errs != nil {
			err = errs[n]
		}
		if err == nil {
			acked = append(acked, walEvent{id: e.id, createdAt: rows[byID[e.id]].CreatedAt})
			r.held.pop(k, now)
			continue
		}
		e.attempts++
		if r.failed(err) || (r.cfg.MaxAttempts > 0 && e.attempts >= r.cfg.MaxAttempts) {
			reason := fmt.Errorf("%w: %d attempts failed, the last: %w", ErrPermanent, e.attempts, err)
			parkIDs, parkErrs = append(parkIDs, e.id), append(parkErrs, reason.Error())
			for _, behind := range r.held.drop(k)[1:] {
				parkIDs = append(parkIDs, behind.id)
				parkErrs = append(parkErrs, fmt.Sprintf("%v: an earlier event of %s %s is parked", ErrPermanent, k.typ, k.id))
			}
			if k.typ != "" {
				parked[k] = true
			}
			r.log.WarnContext(lctx, "parking an event that cannot be published", "outbox_id", e.id, "error", reason)
			continue
		}
		e.due = now.Add(r.retryBackoff(e.attempts))
		failedIDs, failedErr = append(failedIDs, e.id), append(failedErr, err.Error())
	}
	if len(acked) > 0 {
		if err := r.markWithRetry(lctx, lctx, acked); err != nil {
			return 0, err
		}
	}
	if len(parkIDs) > 0 {
		n, err := r.queries.ParkEvents(lctx, outboxdb.ParkEventsParams{Ids: parkIDs, Errors: parkErrs})
		if err != nil {
			return 0, fmt.Errorf("parking %d held events: %w", len(parkIDs), err)
		}
		r.metrics.parkedTotal.Add(float64(n))
	}
	if len(failedIDs) > 0 {
		if _, err := r.queries.RecordFailedAttempts(lctx, outboxdb.RecordFailedAttemptsParams{Ids: failedIDs, Errors: failedErr}); err != nil {
			return 0, fmt.Errorf("counting the attempts of %d held events: %w", len(failedIDs), err)
		}
	}
	return len(acked), nil
}

// invisible reports whether transaction xid (0: none) is committed but not
// yet visible; an error reads as visible.
func (r *WALRelay) invisible(ctx context.Context, xid uint32) bool {
	if xid == 0 {
		return false
	}
	n, err := r.queries.InvisibleTransactions(ctx, []int64{int64(xid)})
	return err == nil && n > 0
}
