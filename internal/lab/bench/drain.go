package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DrainResult is one S2 run: a backlog drained by some relays.
type DrainResult struct {
	Relays     int             `json:"relays"`
	Events     int             `json:"events"`
	Seconds    float64         `json:"seconds"`
	PerSecond  float64         `json:"per_second"`
	Statements StatementCounts `json:"statements"`
	CPU        *CPU            `json:"cpu,omitempty"`
	// PeerCPUSeconds is a peer's own CPU over the drain (user + system), for
	// a contender that runs as a process of its own (a JVM's: every thread,
	// JIT and GC included); paylab's relays have none.
	PeerCPUSeconds float64 `json:"peer_cpu_seconds,omitempty"`
}

// backlog is an outbox holding a backlog of undispatched events for topic.
type backlog struct {
	dbURL, topic string
	events       int
}

// newBacklog creates a database for stage (or uses dbURL when not empty)
// and a topic, and seeds n undispatched events.
func (e *env) newBacklog(ctx context.Context, stage, dbURL string, n int) (backlog, error) {
	return e.newBacklogTx(ctx, stage, dbURL, n, 1)
}

// newBacklogTx is newBacklog with the events committed in txs equal
// transactions.
func (e *env) newBacklogTx(ctx context.Context, stage, dbURL string, n, txs int) (backlog, error) {
	b := backlog{dbURL: dbURL, events: n}
	var err error
	if b.dbURL == "" {
		if b.dbURL, err = e.database(ctx, stage, "orders"); err != nil {
			return b, err
		}
	}
	if b.topic, err = e.topic(stage); err != nil {
		return b, err
	}
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return b, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return b, seedOutboxTx(ctx, conn, b.topic, n, txs, false)
}

// drain is S2: n relays (default configuration, LISTEN/NOTIFY on) drain the
// backlog; the clock runs from their start until the outbox has recorded
// every event dispatched. The tracer counts their statements, and
// pg_stat_database the database's transactions, over the same span.
func (e *env) drain(ctx context.Context, b backlog, n int) (DrainResult, error) {
	res := DrainResult{Relays: n, Events: b.events}
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	before, err := serverTransactions(ctx, conn)
	if err != nil {
		return res, err
	}
	tracer := newStatements()
	recorded := make(chan time.Time, 1)
	tracer.onComplete = func(total int) {
		if total >= b.events {
			select {
			case recorded <- time.Now():
			default:
			}
		}
	}
	start, cpu := time.Now(), sampleCPU()
	rs, err := e.startRelays(ctx, b.dbURL, n, false, tracer)
	if err != nil {
		return res, err
	}
	var end time.Time
	select {
	case end = <-recorded:
	case <-ctx.Done():
		_ = rs.stop()
		return res, ctx.Err()
	}
	res.CPU = cpu.perEvent(sampleCPU(), b.events, 0)
	if err := rs.stop(); err != nil {
		return res, fmt.Errorf("relays: %w", err)
	}
	// Counted over the relays' whole life, as the server counts: their
	// idle polls after the drain are among the claims that found nothing.
	res.Statements = tracer.counts(b.events)
	var pending int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE dispatched_at IS NULL`).Scan(&pending); err != nil {
		return res, err
	}
	if pending > 0 {
		return res, fmt.Errorf("%d events still pending after the relays recorded %d", pending, b.events)
	}
	after, err := serverTransactions(ctx, conn)
	if err != nil {
		return res, err
	}
	res.Statements.ServerTransactions = after - before
	res.Seconds = end.Sub(start).Seconds()
	res.PerSecond = perSecond(b.events, end.Sub(start))
	return res, nil
}

// serverTransactions reads the database's committed and rolled back
// transactions. Backends report them when they exit (the seed's and the
// relays' have) or within seconds of going idle (this run's own reads), so
// the count is approximate by a few.
func serverTransactions(ctx context.Context, conn *pgx.Conn) (int64, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(500 * time.Millisecond):
	}
	var n int64
	err := conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}
