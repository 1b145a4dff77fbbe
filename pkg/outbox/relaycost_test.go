package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
)

// TestRelayCost measures what the polling relay costs PostgreSQL per event:
// a relay with a publisher that acknowledges at once drains a backlog of
// OUTBOX_RELAYCOST_EVENTS events (default 100 000, one per order, as the
// bench seeds them) over OUTBOX_RELAYCOST_HISTORY dispatched rows (default
// none), then the table is vacuumed. It reports the server's CPU per event
// (every process of the server: backends, autovacuum, WAL writer), the WAL
// per event, and per statement (pg_stat_statements, when loaded) calls,
// time and WAL.
//
// It needs a server of its own, on this machine, that nothing else uses
// while it runs (the CPU and WAL are the whole server's): set
// OUTBOX_RELAYCOST_ADMIN_URL to its superuser URL and
// OUTBOX_RELAYCOST_PGDATA to its data folder (for the postmaster's pid).
// Skipped otherwise. One way to get such a server: PG_NODES=1
// PAYLAB_STACK_DIR=/tmp/cost PAYLAB_PG_PORT=25432 scripts/stack.sh up pg,
// with shared_preload_libraries = 'pg_stat_statements' added to its
// postgresql.conf and the server restarted. OUTBOX_RELAYCOST_SETUP, when
// set, is SQL run after the migrations: a variant of the schema to compare
// with (alternate the two, the machine's load moves the CPU figures).
func TestRelayCost(t *testing.T) {
	events, history := envInt(t, "OUTBOX_RELAYCOST_EVENTS", 100_000), envInt(t, "OUTBOX_RELAYCOST_HISTORY", 0)
	ctx, admin, pool, postmaster := costDatabase(t, "relaycost")
	if history > 0 {
		seedCost(t, ctx, pool, history, true)
	}
	seedCost(t, ctx, pool, events, false)
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE outbox"); err != nil {
		t.Fatal(err)
	}
	resetStatementStats(ctx, admin)

	reg := prometheus.NewRegistry()
	relay, err := outbox.NewRelay(pool, outbox.PublisherFunc(func(context.Context, []outbox.Event) []error { return nil }),
		outbox.RelayConfig{Retention: -1, Registerer: reg,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cpu0, wal0 := serverCPU(t, postmaster), costWALPosition(t, ctx, admin)
	start := time.Now()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	for metricValue(t, reg, "outbox_published_total") < float64(events) {
		select {
		case err := <-done:
			t.Fatalf("the relay stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	took := time.Since(start)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cpu1, wal1 := serverCPU(t, postmaster), costWALPosition(t, ctx, admin)
	after := statementStats(ctx, admin, pool.Config().ConnConfig.Database)
	if _, err := pool.Exec(ctx, "VACUUM outbox"); err != nil {
		t.Fatal(err)
	}
	cpu2, wal2 := serverCPU(t, postmaster), costWALPosition(t, ctx, admin)
	var size, heap, pending, updates, hot int64
	if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('outbox'), pg_relation_size('outbox'),
		(SELECT count(*) FROM outbox WHERE dispatched_at IS NULL), n_tup_upd, n_tup_hot_upd
		FROM pg_stat_user_tables WHERE relname = 'outbox'`).Scan(&size, &heap, &pending, &updates, &hot); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Fatalf("%d events pending after the drain", pending)
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(events) }
	t.Logf("RESULT events=%d history=%d took=%.1fs pg_cpu_us_per_event=%.1f wal_bytes_per_event=%.0f "+
		"with_vacuum: pg_cpu_us_per_event=%.1f wal_bytes_per_event=%.0f table_bytes=%d heap_bytes=%d updates=%d hot=%d",
		events, history, took.Seconds(), per(cpu1-cpu0), float64(wal1-wal0)/float64(events),
		per(cpu2-cpu0), float64(wal2-wal0)/float64(events), size, heap, updates, hot)
	for _, s := range after {
		t.Logf("STATEMENT %-14s calls=%d rows=%d ms=%.0f us_per_event=%.1f wal_bytes_per_event=%.0f",
			s.name, s.calls, s.rows, s.ms, s.ms*1000/float64(events), float64(s.wal)/float64(events))
	}
}

// TestCaptureCost measures what the capture's event write costs PostgreSQL:
// OUTBOX_RELAYCOST_EVENTS events (default 100 000), each enqueued in a
// transaction of its own by 8 writers, half of them an order's first event
// and half its second (as a capture and a refund). It reports the server's
// CPU and WAL per event. Same server requirements as TestRelayCost.
func TestCaptureCost(t *testing.T) {
	events := envInt(t, "OUTBOX_RELAYCOST_EVENTS", 100_000)
	ctx, admin, pool, postmaster := costDatabase(t, "capturecost")
	const writers = 8
	errs := make(chan error, writers)
	cpu0, wal0 := serverCPU(t, postmaster), costWALPosition(t, ctx, admin)
	start := time.Now()
	for w := range writers {
		go func() {
			for k := range events / writers {
				order, seq := fmt.Sprintf("order-%d-%d", w, k/2), int64(1+k%2)
				e := event("order-events", order, seq)
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, e) }); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	cpu1, wal1 := serverCPU(t, postmaster), costWALPosition(t, ctx, admin)
	t.Logf("RESULT capture events=%d took=%.1fs pg_cpu_us_per_event=%.1f wal_bytes_per_event=%.0f",
		events, took.Seconds(), float64((cpu1-cpu0).Microseconds())/float64(events), float64(wal1-wal0)/float64(events))
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// seedCost inserts n events, one per order, shaped as the orders service
// writes them; history rows are dispatched.
func seedCost(t *testing.T, ctx context.Context, pool *pgxpool.Pool, n int, history bool) {
	t.Helper()
	dispatched, prefix := "NULL::timestamptz", fmt.Sprintf("%08x", rand.Uint32())
	if history {
		dispatched = "now() - interval '1 day'"
	}
	_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version,
		sequence, topic, payload, headers, occurred_at, dispatched_at)
	SELECT e::uuid, 'order', o, 'OrderCaptured', 1, 1, 'order-events',
		jsonb_build_object('schema_version', 1, 'sequence', 1, 'order_id', o,
			'customer_id', 'cus_' || (i %% 1000), 'merchant_id', 'mer_' || (i %% 50),
			'amount', 100 + (i * 7919) %% 49900, 'currency', (ARRAY['EUR', 'USD', 'GBP', 'JPY'])[1 + i %% 4],
			'captured_at', now()),
		jsonb_build_object('traceparent', '00-' || lpad(to_hex(i), 32, '0') || '-' || lpad(to_hex(i), 16, '0') || '-01'),
		now(), %s
	FROM (SELECT i, '%[2]s-0000-7000-8000-' || lpad(to_hex(i), 12, '0') AS e,
	             '%[2]s-0001-7000-8000-' || lpad(to_hex(i), 12, '0') AS o
	      FROM generate_series(1::bigint, %[3]d) AS i) AS s`, dispatched, prefix, n))
	if err != nil {
		t.Fatal(err)
	}
}

// costDatabase is the cost tests' server (the test is skipped unless
// OUTBOX_RELAYCOST_ADMIN_URL and OUTBOX_RELAYCOST_PGDATA name it): a
// connection to it as its superuser, a pool on a fresh database named after
// prefix with the outbox migrated and OUTBOX_RELAYCOST_SETUP run (a variant
// of the schema to compare with), dropped when the test ends, and the
// postmaster's pid.
func costDatabase(t *testing.T, prefix string) (context.Context, *pgx.Conn, *pgxpool.Pool, int) {
	t.Helper()
	adminURL, pgdata := os.Getenv("OUTBOX_RELAYCOST_ADMIN_URL"), os.Getenv("OUTBOX_RELAYCOST_PGDATA")
	if adminURL == "" || pgdata == "" {
		t.Skip("OUTBOX_RELAYCOST_ADMIN_URL and OUTBOX_RELAYCOST_PGDATA are not set")
	}
	ctx := longContext(t, 30*time.Minute)
	postmaster := postmasterPID(t, pgdata)
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	db := fmt.Sprintf("%s_%08x", prefix, rand.Uint32())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP DATABASE "+db+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	pool, err := pgxpool.New(ctx, strings.Replace(adminURL, "/postgres?", "/"+db+"?", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if setup := os.Getenv("OUTBOX_RELAYCOST_SETUP"); setup != "" {
		if _, err := pool.Exec(ctx, setup); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, admin, pool, postmaster
}

func postmasterPID(t *testing.T, pgdata string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// serverCPU is the CPU time of the postmaster, its running children and its
// exited children so far.
func serverCPU(t *testing.T, postmaster int) time.Duration {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total time.Duration
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		end := bytes.LastIndexByte(b, ')')
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:bytes.IndexByte(b, '(')])))
		f := strings.Fields(string(b[end+1:]))
		if len(f) < 15 {
			continue
		}
		ticks := func(i int) time.Duration {
			v, _ := strconv.ParseInt(f[i-3], 10, 64)
			return time.Duration(v) * 10 * time.Millisecond
		}
		ppid, _ := strconv.Atoi(f[1])
		switch {
		case pid == postmaster:
			total += ticks(14) + ticks(15) + ticks(16) + ticks(17)
		case ppid == postmaster:
			total += ticks(14) + ticks(15)
		}
	}
	return total
}

func costWALPosition(t *testing.T, ctx context.Context, c *pgx.Conn) int64 {
	t.Helper()
	var lsn int64
	if err := c.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

type statementStat struct {
	name             string
	calls, rows, wal int64
	ms               float64
}

// resetStatementStats empties pg_stat_statements, if the server has it.
func resetStatementStats(ctx context.Context, admin *pgx.Conn) {
	_, _ = admin.Exec(ctx, "SELECT pg_stat_statements_reset()")
}

// statementStats reads pg_stat_statements for db by sqlc query name, or
// nothing when the server does not have the extension.
func statementStats(ctx context.Context, admin *pgx.Conn, db string) []statementStat {
	rows, err := admin.Query(ctx, `SELECT substring(query from '-- name: (\w+)'), sum(calls)::bigint, sum(rows)::bigint,
		sum(total_exec_time + total_plan_time)::float8, sum(wal_bytes)::bigint
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE d.datname = $1 GROUP BY 1 ORDER BY 4 DESC`, db)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []statementStat
	for rows.Next() {
		var s statementStat
		var name *string
		if err := rows.Scan(&name, &s.calls, &s.rows, &s.ms, &s.wal); err != nil {
			return nil
		}
		s.name = "other"
		if name != nil {
			s.name = *name
		}
		out = append(out, s)
	}
	return out
}
