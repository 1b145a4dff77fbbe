package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

// Relay publishes committed outbox events to a broker. Any number of relays
// may run against one table; doc.go explains how they share the work.
type Relay struct {
	*relayCore
	poll pollMetrics
	wake chan struct{}
}

// NewRelay returns a relay that claims events from the outbox table in pool
// (cfg.Table) and publishes them with pub. cfg's zero fields take their
// defaults.
func NewRelay(pool *pgxpool.Pool, pub Publisher, cfg RelayConfig) (*Relay, error) {
	core, err := newCore(pool, pub, cfg.relay(), func(cfg relayConfig) *slog.Logger { return cfg.Logger.With("relay", cfg.ID) })
	if err != nil {
		return nil, err
	}
	pm, err := newPollMetrics(core.cfg.Registerer, core.cfg.MetricPrefix)
	if err != nil {
		return nil, fmt.Errorf("outbox: registering relay metrics: %w", err)
	}
	return &Relay{relayCore: core, poll: pm, wake: make(chan struct{}, 1)}, nil
}

// ID is the relay's lease owner name.
func (r *Relay) ID() string { return r.cfg.ID }

// Run publishes events until ctx ends, then finishes the batches in flight
// (within their budgets) and returns nil. Database and broker errors are
// logged, counted and retried; they do not stop the relay.
//
// Run holds the relay's guard meanwhile (doc.go, "Running modes and relay
// IDs"): it returns ErrRelayIDInUse if another running relay has its ID on
// the table, and ErrWALRelayRunning while a WAL relay runs against the
// table. It then drops the WAL relay's slot left behind, if any. If the
// guard's connection breaks, the relay publishes nothing more until it has
// taken the guard again, and returns those errors if it cannot.
func (r *Relay) Run(ctx context.Context) error {
	r.log.InfoContext(ctx, "outbox relay started", "batch_size", r.cfg.BatchSize,
		"lease_ttl", r.cfg.LeaseTTL, "poll_interval", r.cfg.PollInterval, "poll_only", r.cfg.PollOnly)
	err := r.runExclusive(ctx, func(ctx context.Context) error {
		g, gctx := errgroup.WithContext(ctx)
		if !r.cfg.PollOnly {
			g.Go(func() error { return r.listen(gctx) })
		}
		g.Go(func() error { return r.dispatchLoop(gctx) })
		g.Go(func() error { return r.statsLoop(gctx) })
		if r.cfg.Retention > 0 {
			g.Go(func() error { return r.retentionLoop(gctx) })
		}
		return g.Wait()
	})
	r.log.InfoContext(context.WithoutCancel(ctx), "outbox relay stopped")
	return err
}

// dispatchLoop runs batches in a two-stage pipeline: while one batch's
// outcome is being recorded (the mark, the most expensive statement: it
// moves every row out of the pending indexes), the next batch is claimed
// and published. At most one mark is in flight, and a batch is only
// claimed when the previous one has been acknowledged, so a relay never
// holds more than two batches and a crash leaves at most one batch leased
// and unpublished. Ordering is unaffected: an event still being marked is
// undispatched, so its aggregate's next event is not claimable yet.
//
// The loop goes on while rounds make progress (a full batch, or a mark that
// dispatched events and so may have made their aggregates' next events
// claimable); otherwise it waits for a notification or the poll interval.
// Unless the last batch was full, a claim starts no sooner than
// RoundInterval after the previous one: under a steady stream of commits each
// round takes what committed meanwhile, instead of a round (two statements,
// a produce request, the consumers' fetches) for every few events. A batch smaller than BatchSize means there is no backlog: it is
// marked before the next claim, as without the overlap.
func (r *Relay) dispatchLoop(ctx context.Context) error {
	var marking <-chan markResult // the mark in flight, if any
	awaitMark := func() markResult {
		if marking == nil {
			return markResult{}
		}
		m := <-marking
		marking = nil
		if m.err != nil {
			r.metrics.relayErrors.Inc()
			r.log.ErrorContext(ctx, "recording a batch's outcome failed", "error", m.err)
		}
		return m
	}
	defer awaitMark()

	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastClaim time.Time
	full := false // the last batch was full: a backlog, no pacing
	for {
		if wait := r.cfg.RoundInterval - time.Since(lastClaim); wait > 0 && !full {
			pause(ctx, wait)
		}
		lastClaim = time.Now()
		b, err := r.claimAndPublish(ctx)
		full = b != nil && err == nil && len(b.rows) == r.cfg.BatchSize
		progress := awaitMark().res.Dispatched > 0
		if err != nil && ctx.Err() == nil {
			r.metrics.relayErrors.Inc()
			r.log.ErrorContext(ctx, "outbox relay round failed", "error", err)
		}
		var outagePause time.Duration
		if b != nil && err == nil {
			marking = r.markAsync(ctx, b)
			switch {
			case b.isOutage():
				// The broker is down (outage.go): the next claim would fail
				// the same way. Record this batch, then pause.
				outagePause = awaitMark().pause
			case len(b.rows) == r.cfg.BatchSize:
				progress = true // more is waiting: claim it while this one is marked
			default:
				progress = awaitMark().res.Dispatched > 0 || progress // no backlog to overlap with
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if outagePause > 0 {
			pause(ctx, outagePause)
			continue
		}
		if err == nil && progress {
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

type markResult struct {
	res   BatchResult
	pause time.Duration // > 0 after an outage batch
	err   error
}

// markAsync records b's outcome in the background; the result arrives on
// the returned channel.
func (r *Relay) markAsync(ctx context.Context, b *batch) <-chan markResult {
	done := make(chan markResult, 1)
	go func() {
		res, pause, err := r.complete(ctx, b)
		done <- markResult{res, pause, err}
	}()
	return done
}

// BatchResult is what one RunBatch did. Outage is true when every event
// failed, none permanently: the relay took it for a broker outage (see
// doc.go), did not count the attempt and released the events after the
// outage backoff. Run then pauses; a caller of RunBatch should too.
type BatchResult struct {
	Claimed, Dispatched, Failed, Parked, Reclaimed int
	Outage                                         bool
}

// RunBatch claims one batch, publishes it and records the outcome: two
// statements per batch. Run does the same with the recording of one batch
// overlapping the next batch; tests and tools may call RunBatch directly.
// Once a batch is claimed it is finished even if ctx ends, within its
// budgets.
func (r *Relay) RunBatch(ctx context.Context) (BatchResult, error) {
	b, err := r.claimAndPublish(ctx)
	if err != nil || b == nil {
		var res BatchResult
		if b != nil {
			res = b.res
		}
		return res, err
	}
	res, _, err := r.complete(ctx, b)
	return res, err
}
