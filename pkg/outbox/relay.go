package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// Relay publishes committed outbox events to a broker. Any number of relays
// may run against one table; doc.go explains how they share the work.
type Relay struct {
	pool    *pgxpool.Pool
	queries *outboxdb.Queries
	pub     Publisher
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	wake    chan struct{}
}

// NewRelay returns a relay that claims events from the outbox table in pool
// and publishes them with pub. cfg's zero fields take their defaults.
func NewRelay(pool *pgxpool.Pool, pub Publisher, cfg Config) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("outbox: invalid relay config: %w", err)
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("outbox: registering relay metrics: %w", err)
	}
	return &Relay{
		pool:    pool,
		queries: outboxdb.New(withCustomPlans(pool)),
		pub:     pub,
		cfg:     cfg,
		log:     cfg.Logger.With("relay", cfg.ID),
		metrics: m,
		wake:    make(chan struct{}, 1),
	}, nil
}

// ID is the relay's lease owner name.
func (r *Relay) ID() string { return r.cfg.ID }

// Run publishes events until ctx ends, then finishes the batch in flight
// (within the publish timeout) and returns nil. Database and broker errors
// are logged, counted and retried; they do not stop the relay.
func (r *Relay) Run(ctx context.Context) error {
	r.log.InfoContext(ctx, "outbox relay started", "batch_size", r.cfg.BatchSize,
		"lease_ttl", r.cfg.LeaseTTL, "poll_interval", r.cfg.PollInterval)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.listen(gctx) })
	g.Go(func() error { return r.dispatchLoop(gctx) })
	g.Go(func() error { return r.statsLoop(gctx) })
	if r.cfg.Retention > 0 {
		g.Go(func() error { return r.retentionLoop(gctx) })
	}
	err := g.Wait()
	r.log.InfoContext(context.WithoutCancel(ctx), "outbox relay stopped")
	return err
}

// dispatchLoop runs batches: again at once while they make progress
// (a full batch means more is waiting; a dispatched event may have made its
// aggregate's next event claimable), otherwise after a notification or the
// poll interval.
func (r *Relay) dispatchLoop(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		res, err := r.RunBatch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.metrics.relayErrors.Inc()
			r.log.ErrorContext(ctx, "outbox relay round failed", "error", err)
		} else if res.Claimed == r.cfg.BatchSize || res.Dispatched > 0 {
			continue
		}
		timer.Reset(r.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// BatchResult is what one RunBatch did.
type BatchResult struct {
	Claimed, Dispatched, Failed, Parked, Reclaimed int
}

// RunBatch claims one batch, publishes it and records the outcome: two
// statements per batch. Run calls it in a loop; tests and tools may call it
// directly. Once a batch is claimed it is finished even if ctx ends, within
// the publish timeout.
func (r *Relay) RunBatch(ctx context.Context) (BatchResult, error) {
	var res BatchResult
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
		return res, fmt.Errorf("claiming a batch (after %v): %w", time.Since(claimStart).Round(time.Millisecond), err)
	}
	if took := time.Since(claimStart); took > r.cfg.LeaseTTL/10 {
		r.log.WarnContext(ctx, "slow claim", "events", len(rows), "took", took)
	}
	if len(rows) == 0 {
		return res, nil
	}
	// The batch was claimed at about this instant: it gets half the lease to
	// be published and a quarter more to be recorded, whatever happens to
	// ctx, so it is finished before the lease can expire.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LeaseTTL/2)
	defer cancel()

	res.Claimed = len(rows)
	r.metrics.batchSize.Observe(float64(len(rows)))
	for _, row := range rows {
		if row.Reclaimed {
			res.Reclaimed++
		}
	}
	r.metrics.leaseReclaims.Add(float64(res.Reclaimed))
	if res.Reclaimed > 0 {
		r.log.InfoContext(ctx, "took over events whose lease had expired", "events", res.Reclaimed)
	}
	if err := r.cfg.Hooks.afterLease(bctx); err != nil {
		return res, err
	}

	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	events, errs := make([]Event, 0, len(rows)), make([]error, len(rows))
	index := make([]int, 0, len(rows)) // events[k] is rows[index[k]]
	for i, row := range rows {
		e, err := eventFromRow(row)
		if err != nil {
			errs[i] = Permanent(err)
			continue
		}
		events, index = append(events, e), append(index, i)
	}
	pt := r.tracePublish(bctx, events)
	start := time.Now()
	pubErrs := r.pub.Publish(pt.ctx, events)
	took := time.Since(start)
	pt.end(pubErrs)
	r.metrics.publishDuration.Observe(took.Seconds())
	if took > r.cfg.LeaseTTL/4 {
		r.log.WarnContext(ctx, "slow publish: the batch took more than a quarter of the lease TTL",
			"events", len(events), "took", took, "lease_ttl", r.cfg.LeaseTTL)
	}
	if pubErrs != nil && len(pubErrs) != len(events) {
		return res, fmt.Errorf("publisher returned %d results for %d events", len(pubErrs), len(events))
	}
	for k, err := range pubErrs {
		errs[index[k]] = err
	}
	if err := r.cfg.Hooks.afterPublishBeforeMark(bctx); err != nil {
		return res, err
	}
	cctx, cancelComplete := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LeaseTTL/4)
	defer cancelComplete()
	return r.complete(cctx, rows, errs, res)
}

// complete records the outcome of every row in one statement.
func (r *Relay) complete(ctx context.Context, rows []outboxdb.ClaimBatchRow, errs []error, res BatchResult) (BatchResult, error) {
	p := outboxdb.CompleteBatchParams{
		Owner:             r.cfg.ID,
		Ids:               make([]int64, len(rows)),
		BackoffSeconds:    r.cfg.RetryBackoff.Seconds(),
		MaxBackoffSeconds: r.cfg.RetryMaxBackoff.Seconds(),
		MaxAttempts:       int32(max(r.cfg.MaxAttempts, 0)),
	}
	failed := map[int64]error{}
	for i, row := range rows {
		p.Ids[i] = row.ID
		err := errs[i]
		if err == nil {
			continue
		}
		msg := err.Error()
		if msg == "" {
			msg = "publish failed"
		}
		permanent := errors.Is(err, ErrPermanent)
		kind := "transient"
		if permanent {
			kind = "permanent"
		}
		r.metrics.publishErrors.WithLabelValues(kind).Inc()
		p.FailedIds = append(p.FailedIds, row.ID)
		p.FailedErrors = append(p.FailedErrors, msg)
		p.FailedPermanent = append(p.FailedPermanent, permanent)
		failed[row.ID] = err
	}
	done, err := r.queries.CompleteBatch(ctx, p)
	if err != nil {
		return res, fmt.Errorf("recording the outcome of %d events: %w", len(rows), err)
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
	if res.Failed > res.Parked {
		r.log.WarnContext(ctx, "events not acknowledged; retrying with backoff",
			"events", res.Failed-res.Parked, "error", firstError(errs))
	}
	if lost := len(rows) - len(done); lost > 0 {
		// Our lease expired and another relay took these rows: it publishes
		// them, so nothing is lost, but the publish timeout is too long for
		// the lease TTL or the relay stalled.
		r.log.WarnContext(ctx, "lease lost before the batch was recorded", "events", lost)
	}
	return res, nil
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
	if len(row.Headers) > 0 && string(row.Headers) != "{}" {
		if err := json.Unmarshal(row.Headers, &e.Headers); err != nil {
			return e, fmt.Errorf("decoding the headers of event %s: %w", row.EventID, err)
		}
	}
	return e, nil
}
