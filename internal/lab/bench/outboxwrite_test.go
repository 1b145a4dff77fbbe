package bench

import (
	"fmt"
	"testing"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// C1's paylab contenders send their transaction as the orders service
// does: BEGIN with the UPDATE, the event with COMMIT, two round trips
// (notify-after-commit shares their transaction; its Notifier's own
// connection would blur the count, so it is left out here).
func TestC1TransactionsTakeTwoRoundTrips(t *testing.T) {
	t.Parallel()
	for _, name := range []string{writeInsertOnly, writeNotifyInTx} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbURL := testenv.NewDatabase(t, "orders")
			pool, stmts := testenv.CountingPool(t, dbURL)
			ctx := testenv.Context(t)
			if _, err := pool.Exec(ctx, fmt.Sprintf(writeSeedOrders, 2)); err != nil {
				t.Fatal(err)
			}
			var id string
			if err := pool.QueryRow(ctx, writeOrderIDs+" LIMIT 1").Scan(&id); err != nil {
				t.Fatal(err)
			}
			write, stop, err := writer(ctx, pool, name)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			payload, headers := writeEvent()
			// The first transaction on the connection also describes its statements.
			if err := write(ctx, id, payload, headers); err != nil {
				t.Fatal(err)
			}
			trips := stmts.RoundTrips()
			if err := write(ctx, id, payload, headers); err != nil {
				t.Fatal(err)
			}
			if got := stmts.RoundTrips() - trips; got != 2 {
				t.Errorf("round trips: %d, want 2", got)
			}
			var events, seq int
			if err := pool.QueryRow(ctx, "SELECT count(*), max(sequence) FROM outbox WHERE aggregate_id = $1", id).Scan(&events, &seq); err != nil {
				t.Fatal(err)
			}
			if events != 2 || seq != 2 {
				t.Errorf("outbox rows %d, last sequence %d; want 2 and 2", events, seq)
			}
		})
	}
}
