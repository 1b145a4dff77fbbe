package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// DefaultWALBatchSize is the WAL relay's batch size when WALConfig.BatchSize
// is zero: a batch is one publish round trip and one statement that records
// it, so larger batches cost the database less per event.
const DefaultWALBatchSize = 5000

// WALRelay publishes the outbox's committed inserts as they appear in the
// write-ahead log, read through a logical replication slot (pgoutput),
// instead of claiming rows: no claim statement, and one statement per batch
// that deletes the published rows (or, with WALConfig.KeepDispatched, sets
// their dispatched_at). Run relays on several hosts for availability: one is
// the slot's reader, the others are standbys (see "The WAL relay" in the
// package documentation).
type WALRelay struct {
	*relayCore
	repl   *pgconn.Config
	wal    walMetrics
	health readerHealth  // what Ready reports
	held   heldSet       // events held aside for a retry (walheld.go)
	guard  *standbyGuard // holds batches until the synchronous standbys have them (walguard.go)
	// records runs the statements that record a batch (record) as
	// prepared statements: their one parameter is the batch's ids, and a
	// custom plan (relayCore.queries, see customPlans) would estimate each
	// of its thousands of ids on every batch, for the same primary-key
	// lookup the generic plan makes.
	records *outboxdb.Queries
}

// walMetrics are the WAL relay's own metrics, next to the polling relay's.
type walMetrics struct {
	slot       slotMetrics
	active     prometheus.Gauge
	reconnects prometheus.Counter
	takeovers  prometheus.Counter
	// invisibleWaits counts batches whose rows had to wait for their
	// transactions to become visible before they could be recorded.
	invisibleWaits prometheus.Counter
	// fallback is 1 while the reader publishes from the table because the
	// slot cannot be streamed.
	fallback prometheus.Gauge
	// swept counts events the stream passed without recording them, found
	// pending by the sweep and published again (walsweep.go).
	swept prometheus.Counter
}

// NewWALRelay returns a relay that streams the outbox table in pool
// (cfg.Table) from the replication slot cfg.Slot, connecting to it
// with replURL (a connection string of the same database, for a role with
// the REPLICATION attribute; "replication=database" is added), and
// publishes with pub. Run sets up the slot and the publication (SetupWAL)
// once it holds the relay's guard. cfg's zero fields take their defaults;
// BatchSize defaults to DefaultWALBatchSize.
func NewWALRelay(pool *pgxpool.Pool, replURL string, pub Publisher, cfg WALConfig) (*WALRelay, error) {
	core, err := newCore(pool, pub, cfg.relay(), func(cfg relayConfig) *slog.Logger {
		return cfg.Logger.With("relay", cfg.ID, "slot", cfg.Slot)
	})
	if err != nil {
		return nil, err
	}
	rc := core.cfg
	repl, err := pgconn.ParseConfig(replURL)
	if err != nil {
		return nil, fmt.Errorf("outbox: parsing the replication connection string: %w", err)
	}
	repl.RuntimeParams["replication"] = "database"
	repl.RuntimeParams["application_name"] = "outbox-wal-relay " + rc.ID
	p := rc.MetricPrefix + "_wal_"
	m := walMetrics{
		slot: newSlotMetrics(p, rc.Slot),
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "active_reader",
			Help: "1 while this relay holds the reader lease and streams the slot, 0 while it is a standby."}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{Name: p + "reconnects_total",
			Help: "Replication connections lost or refused and opened again."}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: p + "takeovers_total",
			Help: "Reader leases taken over after another relay's expired."}),
		fallback: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "table_fallback",
			Help: "1 while the reader publishes pending events from the table because the slot cannot be streamed (missing and not creatable, invalidated, the publication wrong)."}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{Name: p + "swept_total",
			Help: "Events found pending after the stream had passed their commit, and published again by the sweep: 0 unless something lost them (a slot recreated, say)."}),
		invisibleWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: p + "invisible_commit_waits_total",
			Help: "Batches recorded only after waiting for their streamed commits to become visible (a commit is streamed once flushed, visible a moment later, or after synchronous standbys confirmed it)."}),
	}
	if err := cfg.StandbyGuard.validate(); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	guard := newStandbyGuard(cfg.StandbyGuard, p, core.log, readStandbys(pool))
	for _, c := range append(append(m.slot.collectors(), m.active, m.reconnects, m.takeovers, m.invisibleWaits, m.swept, m.fallback), guard.collectors()...) {
		if err := rc.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("outbox: registering WAL relay metrics: %w", err)
		}
	}
	return &WALRelay{relayCore: core, repl: repl, wal: m, guard: guard,
		records: outboxdb.New(withTable(pool, rc.Table, core.sql))}, nil
}

// ID is the relay's name in the reader lease.
func (r *WALRelay) ID() string { return r.cfg.ID }

// Run reads and publishes while this relay holds the reader lease, and
// waits as a standby while another relay does, until ctx ends. At the end
// it finishes the batch being published, confirms what was acknowledged,
// releases the lease and returns nil. Database, replication and broker
// errors are logged, counted and retried; they do not stop the relay.
//
// Run holds the relay's guard meanwhile (doc.go, "Running modes and relay
// IDs"): it returns ErrRelayIDInUse if another running relay has its ID on
// the table; while polling relays run against the table it waits, not
// Ready, until they have all stopped. Only then does it set up the slot
// (SetupWAL, retried until it succeeds) and start. If the guard's
// connection breaks, the relay publishes nothing more until it has taken
// the guard again, and returns ErrRelayIDInUse if it cannot.
func (r *WALRelay) Run(ctx context.Context) error {
	r.log.InfoContext(ctx, "outbox WAL relay started", "batch_size", r.cfg.BatchSize,
		"lease_ttl", r.cfg.LeaseTTL, "publication", r.cfg.Publication)
	err := r.runExclusive(ctx, func(ctx context.Context) error {
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return r.readerLoop(gctx) })
		g.Go(func() error { return r.statsLoop(gctx) })
		g.Go(func() error { return r.slotStatsLoop(gctx) })
		if r.cfg.Retention > 0 {
			g.Go(func() error { return r.retentionLoop(gctx) })
		}
		return g.Wait()
	})
	r.log.InfoContext(context.WithoutCancel(ctx), "outbox WAL relay stopped")
	return err
}

// readerLoop is the standby/reader cycle: poll for the lease every
// PollInterval; while it is held, serve as the reader.
func (r *WALRelay) readerLoop(ctx context.Context) error {
	standby := false
	for ctx.Err() == nil {
		sent := time.Now()
		row, err := r.acquire(ctx)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if !standby {
				r.log.InfoContext(ctx, "another relay reads the slot; standing by")
				standby = true
			}
		case err != nil:
			if ctx.Err() == nil {
				r.metrics.relayErrors.Inc()
				r.log.ErrorContext(ctx, "taking the reader lease failed", "error", err)
			}
		default:
			standby = false
			if row.PreviousOwner != "" {
				r.wal.takeovers.Inc()
				r.log.WarnContext(ctx, "took over the slot from a reader whose lease expired", "previous", row.PreviousOwner)
			}
			r.serveWithLease(ctx, sent)
			continue // poll at once: after a clean stop ctx is done; after a lost lease, try again
		}
		pause(ctx, r.cfg.PollInterval)
	}
	return nil
}

// acquire takes the reader lease; pgx.ErrNoRows while another relay holds it.
func (r *WALRelay) acquire(ctx context.Context) (outboxdb.AcquireWALLeaseRow, error) {
	actx, cancel := context.WithTimeout(ctx, r.cfg.LeaseTTL/4)
	defer cancel()
	return r.queries.AcquireWALLease(actx, outboxdb.AcquireWALLeaseParams{
		Owner: r.cfg.ID, LeaseSeconds: r.cfg.LeaseTTL.Seconds(), Slot: r.cfg.Slot,
	})
}

// serveWithLease is the reader's life: it holds the lease (renewing it every
// third of the TTL) and streams until ctx ends or the lease is lost.
func (r *WALRelay) serveWithLease(ctx context.Context, sent time.Time) {
	l := r.holdLease(ctx, sent)
	r.wal.active.Set(1)
	r.log.InfoContext(ctx, "reading the slot")
	r.serve(ctx, l.ctx)
	r.wal.active.Set(0)
	r.health.set(nil) // a standby, or stopped
	held := l.stop()
	if held && ctx.Err() != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LeaseTTL/4)
		defer cancel()
		if err := r.queries.ReleaseWALLease(rctx, outboxdb.ReleaseWALLeaseParams{Slot: r.cfg.Slot, Owner: r.cfg.ID}); err != nil {
			r.log.WarnContext(rctx, "releasing the reader lease failed; a standby takes over when it expires", "error", err)
		}
	}
	if !held && ctx.Err() == nil {
		r.log.ErrorContext(ctx, "lost the reader lease: stopped publishing; standing by")
	}
}

// heldLease is a reader lease being renewed. ctx ends when the lease is
// lost: the renewal found it taken or expired, or no renewal succeeded
// before the relay's own deadline.
type heldLease struct {
	ctx  context.Context
	lost atomic.Bool
	stop func() bool // stops renewing; reports whether the lease was still held
}

// holdLease renews the lease taken at start. The relay's deadline is a
// quarter of the TTL earlier than the database's expiry, measured from the
// moment each successful statement was sent (the database's now() is
// later), so a reader stops publishing before a standby may start: the
// fence does not depend on the two hosts' clocks agreeing.
func (r *WALRelay) holdLease(ctx context.Context, start time.Time) *heldLease {
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &heldLease{ctx: lctx}
	margin := r.cfg.LeaseTTL * 3 / 4
	var mu sync.Mutex
	deadline := start.Add(margin)
	expire := time.AfterFunc(time.Until(deadline), func() { l.lost.Store(true); cancel() })
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(r.cfg.LeaseTTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			mu.Lock()
			dl := deadline
			mu.Unlock()
			sent := time.Now()
			rctx, rcancel := context.WithDeadline(lctx, dl)
			n, err := r.queries.RenewWALLease(rctx, outboxdb.RenewWALLeaseParams{
				LeaseSeconds: r.cfg.LeaseTTL.Seconds(), Slot: r.cfg.Slot, Owner: r.cfg.ID,
			})
			rcancel()
			switch {
			case err != nil:
				r.log.WarnContext(lctx, "renewing the reader lease failed; retrying", "error", err, "deadline", dl)
			case n == 0:
				l.lost.Store(true)
				cancel()
				return
			default:
				mu.Lock()
				deadline = sent.Add(margin)
				mu.Unlock()
				expire.Reset(time.Until(sent.Add(margin)))
			}
		}
	}()
	l.stop = func() bool {
		close(done)
		<-finished
		expire.Stop()
		held := !l.lost.Load()
		cancel()
		return held
	}
	return l
}
