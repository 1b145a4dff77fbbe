package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// statsCost bounds the share of the database's time the backlog gauges
// take. A refresh counts every pending event (a scan of the table while the
// backlog is large): with 200 000 pending it took 0.2-0.7 s on a loaded
// 2-core machine, so with millions it would fill most of a 5 s interval.
// The next refresh waits at least statsCost times as long as the last one
// took (at most 5 % of one connection's time), when that is longer than
// StatsInterval.
const statsCost = 20

// statsLoop refreshes the backlog gauges every StatsInterval, or less often
// while a refresh is expensive (statsCost).
func (r *relayCore) statsLoop(ctx context.Context) error {
	for {
		start := time.Now()
		if err := r.RefreshStats(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "refreshing outbox gauges failed", "error", err)
		}
		took := time.Since(start)
		next := time.NewTimer(max(r.cfg.StatsInterval-took, statsCost*took))
		select {
		case <-ctx.Done():
			next.Stop()
			return nil
		case <-next.C:
		}
	}
}

// RefreshStats sets the pending, oldest-pending-age and parked gauges from
// one query over the pending events (pendingStats).
func (r *relayCore) RefreshStats(ctx context.Context) error {
	s, err := pendingStats(ctx, r.pool, func(db outboxdb.DBTX) outboxdb.DBTX {
		return withCustomPlans(withTable(db, r.cfg.Table, r.sql))
	})
	if err != nil {
		return fmt.Errorf("reading outbox backlog: %w", err)
	}
	r.metrics.pending.Set(float64(s.Pending))
	r.metrics.oldestPendingAge.Set(s.OldestPendingSeconds)
	r.metrics.parked.Set(float64(s.Parked))
	return nil
}

// pendingStats runs PendingStats, on db as wrap makes it, in a transaction
// that runs it in one process without JIT compilation: while the backlog is
// large the query reads every pending row, and parallel workers (with their
// start-up and JIT's compilation) took about 2.3 times the CPU of one
// process for the same count, on the cores the relay needs most then.
func pendingStats(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, wrap func(outboxdb.DBTX) outboxdb.DBTX) (s outboxdb.PendingStatsRow, err error) {
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, statsSettings); err != nil {
			return err
		}
		s, err = outboxdb.New(wrap(tx)).PendingStats(ctx)
		return err
	})
	return s, err
}

// statsSettings makes the rest of the transaction run in one process, not
// compiled.
const statsSettings = `-- name: StatsSettings :one
SELECT set_config('max_parallel_workers_per_gather', '0', true), set_config('jit', 'off', true)`
