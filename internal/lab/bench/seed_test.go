package bench

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// A seeded history lies below what is written after it, as a week of
// UUIDv7s does: every seeded id, event and order, sorts before a UUIDv7
// drawn now, so the service's inserts land at the indexes' right edge. The
// inbox's two tables get the same orders.
func TestSeededHistoryIsOlderThanNewIDs(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	const n = 1000
	ordersURL := testenv.NewDatabase(t, "orders")
	ledgerURL := testenv.NewDatabase(t, "ledger")
	if err := withConn(ctx, ordersURL, func(c *pgx.Conn) error { return seedOutbox(ctx, c, "order-events", n, true) }); err != nil {
		t.Fatal(err)
	}
	if err := withConn(ctx, ordersURL, func(c *pgx.Conn) error { return seedOutbox(ctx, c, "order-events", n, false) }); err != nil {
		t.Fatal(err)
	}
	if err := withConn(ctx, ledgerURL, func(c *pgx.Conn) error { return seedInbox(ctx, c, n) }); err != nil {
		t.Fatal(err)
	}
	now := uuid.Must(uuid.NewV7())
	check := func(url, query string, want int) {
		t.Helper()
		err := withConn(ctx, url, func(c *pgx.Conn) error {
			var rows, v7, older, distinct int
			err := c.QueryRow(ctx, query, now.String()).Scan(&rows, &v7, &older, &distinct)
			if err == nil && (rows != want || v7 != want || older != want || distinct != want) {
				t.Errorf("%s\n%d rows: %d UUIDv7s, %d before %s, %d distinct; want %d of each", query, rows, v7, older, now, distinct, want)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A UUIDv7: version 7 in the 13th hex digit, variant 10 in the 17th.
	const isV7 = `substr(%[1]s::text, 15, 1) = '7' AND substr(%[1]s::text, 20, 1) IN ('8', '9', 'a', 'b')`
	check(ordersURL, `SELECT count(*), count(*) FILTER (WHERE `+fmt.Sprintf(isV7, "event_id")+` AND `+fmt.Sprintf(isV7, "aggregate_id")+`),
		count(*) FILTER (WHERE event_id < $1::uuid AND aggregate_id < $1::text), count(DISTINCT event_id) FROM outbox`, 2*n)
	check(ledgerURL, `SELECT count(*), count(*) FILTER (WHERE `+fmt.Sprintf(isV7, "event_id")+` AND `+fmt.Sprintf(isV7, "aggregate_id")+`),
		count(*) FILTER (WHERE event_id < $1::uuid AND aggregate_id < $1::text), count(DISTINCT aggregate_id) FROM inbox
		JOIN inbox_sequences USING (aggregate_id)`, n)
	// The history's ids rise with its times.
	err := withConn(ctx, ordersURL, func(c *pgx.Conn) error {
		var disordered int
		err := c.QueryRow(ctx, `SELECT count(*) FROM (SELECT event_id < lag(event_id) OVER (ORDER BY created_at, id) AS down
			FROM outbox WHERE dispatched_at IS NOT NULL) AS s WHERE down`).Scan(&disordered)
		if err == nil && disordered > 0 {
			t.Errorf("%d history ids below the one written before them", disordered)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
