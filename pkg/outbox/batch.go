package outbox

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// batch is one claimed batch on its way through the relay.
type batch struct {
	rows []outboxdb.ClaimBatchRow // sorted by id
	errs []error                  // per row: nil once acknowledged
	res  BatchResult
}

// claimAndPublish claims a batch and publishes it: it returns once the
// publisher has given its verdict on every event, or nil when nothing was
// claimable. A claimed batch is published even if ctx ends.
func (r *Relay) claimAndPublish(ctx context.Context) (*batch, error) {
	// A claim holds row locks while it runs; bound it so a stalled statement
	// cannot keep events from the other relays.
	claimCtx, cancelClaim := context.WithTimeout(ctx, r.cfg.LeaseTTL/4)
	defer cancelClaim()
	claimStart := time.Now()
	rows, err := r.queries.ClaimBatch(claimCtx, outboxdb.ClaimBatchParams{
		Owner:        r.cfg.ID,
		LeaseSeconds: r.cfg.LeaseTTL.Seconds(),
		BatchSize:    int32(r.cfg.BatchSize),
	})
	if err != nil {
		return nil, fmt.Errorf("claiming a batch (after %v): %w", time.Since(claimStart).Round(time.Millisecond), err)
	}
	if took := time.Since(claimStart); took > r.cfg.LeaseTTL/10 {
		r.log.WarnContext(ctx, "slow claim", "events", len(rows), "took", took)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	b := &batch{rows: rows, errs: make([]error, len(rows))}
	b.res.Claimed = len(rows)
	r.metrics.batchSize.Observe(float64(len(rows)))
	for _, row := range rows {
		if row.Reclaimed {
			b.res.Reclaimed++
		}
	}
	r.poll.leaseReclaims.Add(float64(b.res.Reclaimed))
	if b.res.Reclaimed > 0 {
		r.log.InfoContext(ctx, "took over events whose lease had expired", "events", b.res.Reclaimed)
	}
	// From here on the batch is finished whatever happens to ctx.
	bctx := context.WithoutCancel(ctx)
	if err := r.cfg.Hooks.afterLease(bctx); err != nil {
		return b, err
	}
	r.publish(bctx, b)
	if err := r.cfg.Hooks.afterPublishBeforeMark(bctx); err != nil {
		return b, err
	}
	return b, nil
}

// publish sends the batch's events and waits for the publisher's verdict on
// each of them, recording it in b.errs.
//
// The acknowledgements normally arrive well within the ack budget, half the
// lease TTL. When they do not (a loaded broker or machine), giving up would
// be wrong: the events are still in the producer, and if they are
// acknowledged after the relay released them for a retry, they go on the
// wire twice. So the relay renews its lease (one statement, only for such
// slow batches) every half TTL while it waits, and gives up only after
// MaxPublishWait, or when it no longer holds any of the events.
func (r *Relay) publish(ctx context.Context, b *batch) {
	events := make([]Event, 0, len(b.rows))
	index := make([]int, 0, len(b.rows)) // events[k] is b.rows[index[k]]
	for i, row := range b.rows {
		e, err := eventFromRow(row)
		if err != nil {
			b.errs[i] = Permanent(err)
			continue
		}
		events, index = append(events, e), append(index, i)
	}
	pt := r.tracePublish(ctx, events)
	pctx, giveUp := context.WithTimeout(pt.ctx, r.cfg.MaxPublishWait)
	defer giveUp()
	start := time.Now()
	verdict := make(chan []error, 1)
	go func() { verdict <- r.pub.Publish(pctx, events) }()
	renew := time.NewTicker(r.cfg.publishTimeout())
	defer renew.Stop()
	var pubErrs []error
wait:
	for {
		select {
		case pubErrs = <-verdict:
			break wait
		case <-renew.C:
			if held := r.renewLease(ctx, b); held == 0 {
				giveUp() // another relay has the events now
			}
		}
	}
	took := time.Since(start)
	pt.end(pubErrs)
	r.metrics.publishDuration.Observe(took.Seconds())
	if took > r.cfg.LeaseTTL/4 {
		r.log.WarnContext(ctx, "slow publish: the batch took more than a quarter of the lease TTL",
			"events", len(events), "took", took, "lease_ttl", r.cfg.LeaseTTL)
	}
	for k, err := range verdicts(pubErrs, len(events)) {
		b.errs[index[k]] = err
	}
}

// renewLease extends the lease on the batch's events that the relay still
// holds and returns how many those are; on a database error it assumes it
// still holds them all (the lease may then run out: the events would be
// published again by another relay, at least once).
func (r *Relay) renewLease(ctx context.Context, b *batch) int {
	ids := make([]int64, len(b.rows))
	for i, row := range b.rows {
		ids[i] = row.ID
	}
	rctx, cancel := context.WithTimeout(ctx, r.cfg.LeaseTTL/4)
	defer cancel()
	held, err := r.queries.RenewLeases(rctx, outboxdb.RenewLeasesParams{
		Owner: r.cfg.ID, LeaseSeconds: r.cfg.LeaseTTL.Seconds(), Ids: ids,
	})
	if err != nil {
		r.log.WarnContext(ctx, "renewing the lease of a slow batch failed", "events", len(ids), "error", err)
		return len(ids)
	}
	r.poll.leaseRenewals.Inc()
	r.log.WarnContext(ctx, "acknowledgements are slow; renewed the batch's lease", "events", len(ids), "held", len(held))
	return len(held)
}

// complete records the outcome of every row in one statement, only for the
// rows the relay still holds. For an outage batch (outage.go) it also
// returns how long the relay should pause before its next claim.
func (r *Relay) complete(ctx context.Context, b *batch) (BatchResult, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LeaseTTL/4)
	defer cancel()
	res := b.res
	p := outboxdb.CompleteBatchParams{
		Owner:             r.cfg.ID,
		Ids:               make([]int64, len(b.rows)),
		BackoffSeconds:    r.cfg.RetryBackoff.Seconds(),
		MaxBackoffSeconds: r.cfg.RetryMaxBackoff.Seconds(),
		MaxAttempts:       int32(max(r.cfg.MaxAttempts, 0)),
		Fenced:            !r.cfg.Unsafe.UnfencedComplete,
		DeleteDispatched:  r.cfg.DeleteDispatched,
	}
	var pause time.Duration
	switch {
	case b.isOutage():
		pause = r.brokerRefused(ctx, len(b.rows), firstError(b.errs))
		res.Outage = true
		p.Outage, p.OutageBackoffSeconds = true, pause.Seconds()
	case b.anyAcknowledged():
		r.brokerBack(ctx)
	}
	failed := map[int64]error{}
	for i, row := range b.rows {
		p.Ids[i] = row.ID
		err := b.errs[i]
		if err == nil {
			continue
		}
		msg := err.Error()
		if msg == "" {
			msg = "publish failed"
		}
		permanent := r.failed(err)
		p.FailedIds = append(p.FailedIds, row.ID)
		p.FailedErrors = append(p.FailedErrors, msg)
		p.FailedPermanent = append(p.FailedPermanent, permanent)
		failed[row.ID] = err
	}
	done, err := r.queries.CompleteBatch(ctx, p)
	if err != nil {
		return res, pause, fmt.Errorf("recording the outcome of %d events: %w", len(b.rows), err)
	}
	for _, d := range done {
		switch {
		case d.Dispatched:
			res.Dispatched++
			r.metrics.published.Inc()
			r.metrics.publishLatency.Observe(d.LatencySeconds)
		case d.Parked:
			res.Parked++
			res.Failed++
			r.metrics.parkedTotal.Inc()
			r.log.WarnContext(ctx, "parked an event that cannot be published", "outbox_id", d.ID, "error", failed[d.ID])
		default:
			res.Failed++
		}
	}
	if res.Failed > res.Parked && !res.Outage { // an outage is logged when it starts and ends
		r.log.WarnContext(ctx, "events not acknowledged; retrying with backoff",
			"events", res.Failed-res.Parked, "error", firstError(b.errs))
	}
	if lost := len(b.rows) - len(done); lost > 0 {
		// Our lease expired and another relay took these rows: it publishes
		// them, so nothing is lost, but the relay stalled for longer than
		// the lease (its renewals did not get through).
		r.poll.leaseLost.Add(float64(lost))
		r.log.WarnContext(ctx, "lease lost before the batch was recorded", "events", lost)
	}
	return res, pause, nil
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func eventFromRow(row outboxdb.ClaimBatchRow) (Event, error) {
	e := Event{
		ID:            row.EventID,
		AggregateType: row.AggregateType,
		AggregateID:   row.AggregateID,
		Type:          row.EventType,
		SchemaVersion: int(row.SchemaVersion),
		Sequence:      row.Sequence,
		Topic:         row.Topic,
		Payload:       row.Payload,
		OccurredAt:    row.OccurredAt,
	}
	var err error
	if e.Headers, err = decodeHeaders(string(row.Headers)); err != nil {
		return e, fmt.Errorf("decoding the headers of event %s: %w", row.EventID, err)
	}
	return e, nil
}
