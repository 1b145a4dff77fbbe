package outbox

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// explainer answers a query with its plan: the query run as EXPLAIN
// (FORMAT JSON), the plan kept. The queries' own results are not read.
type explainer struct {
	db    outboxdb.DBTX
	mu    *sync.Mutex
	plans *[]string
}

func (x explainer) explain(ctx context.Context, sql string, args []any) {
	var plan string
	if err := x.db.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		plan = "EXPLAIN failed: " + err.Error()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	*x.plans = append(*x.plans, plan)
}

func (x explainer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	x.explain(ctx, sql, args)
	return pgconn.CommandTag{}, nil
}

func (x explainer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	x.explain(ctx, sql, args)
	return x.db.Query(ctx, "SELECT 1 WHERE false")
}

func (x explainer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	x.explain(ctx, sql, args)
	return x.db.QueryRow(ctx, "SELECT 1 WHERE false")
}

// explained wraps db (rendered for the default table) so that each query is
// explained instead of run; plans returns the plans so far.
func explained(db outboxdb.DBTX) (wrapped outboxdb.DBTX, plans func() string) {
	var kept []string
	mu := new(sync.Mutex)
	return explainer{db: withTable(db, DefaultTable, new(sync.Map)), mu: mu, plans: &kept}, func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(kept, "\n")
	}
}

// plansOf runs fn on the outbox's queries over db, explained instead of run,
// and returns their plans.
func plansOf(t *testing.T, db outboxdb.DBTX, fn func(q *outboxdb.Queries)) string {
	t.Helper()
	wrapped, plans := explained(db)
	fn(outboxdb.New(wrapped))
	if plans() == "" {
		t.Fatal("no query was explained")
	}
	return plans()
}

// seedPending inserts n pending events in one statement, one per order.
func seedPending(t *testing.T, ctx context.Context, pool *pgxpool.Pool, n int) {
	t.Helper()
	if _, err := pool.Exec(ctx, `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, sequence, topic, payload, headers, occurred_at)
		SELECT gen_random_uuid(), 'order', 'order-' || i, 'OrderCaptured', 1, 'order-events',
		       jsonb_build_object('order_id', 'order-' || i, 'amount', i, 'currency', 'EUR', 'customer_id', 'cus_' || i % 1000),
		       jsonb_build_object('traceparent', '00-' || lpad(to_hex(i), 32, '0') || '-' || lpad(to_hex(i), 16, '0') || '-01'), now()
		FROM generate_series(1, $1::int) AS i`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE outbox"); err != nil {
		t.Fatal(err)
	}
}

// The aggregates a WAL relay reads before it streams are found in the index
// of parked events, not by reading every pending event: a backlog does not
// delay the stream's start.
func TestParkedAggregatesReadTheParkedIndex(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, func(ctx context.Context, pool *pgxpool.Pool) error { return Migrate(ctx, pool, Config{}) })
	ctx := testenv.Context(t)
	seedPending(t, ctx, pool, 5000)
	plan := plansOf(t, pool, func(q *outboxdb.Queries) { _, _ = q.ParkedAggregates(ctx) })
	if !strings.Contains(plan, `"Index Name": "outbox_parked_idx"`) || strings.Contains(plan, "Seq Scan") {
		t.Errorf("ParkedAggregates does not read outbox_parked_idx alone:\n%s", plan)
	}
}

// The backlog gauges' query reads every pending event while a backlog is
// large; the relay runs it (pendingStats) in one process, where PostgreSQL
// would otherwise plan parallel workers for it (shown first, on a pool
// whose costs make any scan parallel, as a large backlog does).
func TestPendingStatsRunInOneProcess(t *testing.T) {
	t.Parallel()
	_, dbURL := testenv.NewPool(t, func(ctx context.Context, pool *pgxpool.Pool) error { return Migrate(ctx, pool, Config{}) })
	ctx := testenv.Context(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"parallel_setup_cost": "0", "parallel_tuple_cost": "0", "min_parallel_table_scan_size": "0"} {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	seedPending(t, ctx, pool, 5000)
	parallel := func(plan string) bool { return strings.Contains(plan, `"Workers Planned"`) }
	if plan := plansOf(t, pool, func(q *outboxdb.Queries) { _, _ = q.PendingStats(ctx) }); !parallel(plan) {
		t.Fatalf("outside pendingStats, the pool plans no parallel workers; the test shows nothing:\n%s", plan)
	}
	var plans func() string
	_, _ = pendingStats(ctx, pool, func(db outboxdb.DBTX) outboxdb.DBTX {
		var wrapped outboxdb.DBTX
		wrapped, plans = explained(db)
		return wrapped
	})
	switch plan := plans(); {
	case plan == "":
		t.Fatal("pendingStats explained no query")
	case parallel(plan):
		t.Errorf("pendingStats plans parallel workers:\n%s", plan)
	}
}
