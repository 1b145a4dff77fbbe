package outbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// The relay's statements are never prepared as named statements on its
// connections: each execution is parsed anew, so PostgreSQL plans it with
// the actual parameters and the table's current size. A named statement
// switches to a generic plan after five executions, and one made while the
// outbox was nearly empty scans the table inside the claim's ordering
// check, quadratic in a backlog that comes later.
func TestRelayStatementsAreParsedAtEachExecution(t *testing.T) {
	t.Parallel()
	pool, dbURL := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // every statement of the relay on one session
	relayPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relayPool.Close)
	startRelay(t, relayPool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{
		PollInterval: 20 * time.Millisecond, Logger: testLogger(t),
	})
	for i := range 8 { // more claims and marks than the five custom plans of a named statement
		enqueue(t, ctx, pool, event(topic, fmt.Sprintf("order-%d", i), 1))
		testenv.Eventually(t, 30*time.Second, "the event published", func() bool { return undispatched(t, ctx, pool) == 0 })
	}
	var prepared []string
	err = relayPool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT statement FROM pg_prepared_statements
			WHERE statement NOT LIKE '%pg_prepared_statements%'`, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return err
		}
		prepared, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(prepared) > 0 {
		t.Errorf("the relay's session holds %d named prepared statements: %q", len(prepared), prepared)
	}
}
