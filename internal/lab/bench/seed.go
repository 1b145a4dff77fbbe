package bench

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"
)

// The seeds write OrderCaptured events shaped as the orders service writes
// them (docs/events.md: the payload's fields, a W3C traceparent header), in
// one INSERT … SELECT generate_series each, on the server. Ids are laid out
// as the service's UUIDv7s: the first 48 bits the row's time in
// milliseconds, then the seed's own random bits (newTag), then i. So a
// history's keys lie below those of the events written after it, whose
// inserts land at each index's right edge as they do in production, and
// seeds into one database never collide.

// seedRows returns the SELECT of n seeded events with ids tagged tag
// (newTag): columns i, event_id, order_id (text), at (timestamptz),
// payload, headers. at is now() for a backlog, and spread over the six days
// before now for history (inside the relay's and the inbox's seven-day
// retention, so neither prunes it during a run); two SELECTs with one tag
// give the same rows within one transaction.
func seedRows(tag string, n int, history bool) string {
	at := "now()"
	if history {
		at = fmt.Sprintf("now() - interval '6 days' * (1 - i::float8 / %d)", n)
	}
	return fmt.Sprintf(`SELECT i, e::uuid AS event_id, o AS order_id, t AS at,
	jsonb_build_object('schema_version', 1, 'sequence', 1, 'order_id', o,
		'customer_id', 'cus_' || (i %% 1000), 'merchant_id', 'mer_' || (i %% 50),
		'amount', 100 + (i * 7919) %% 49900, 'currency', (ARRAY['EUR', 'USD', 'GBP', 'JPY'])[1 + i %% 4],
		'captured_at', t) AS payload,
	jsonb_build_object('traceparent', '00-' || lpad(to_hex(i), 32, '0') || '-' || lpad(to_hex(i), 16, '0') || '-01') AS headers
FROM (SELECT i, t, ms || '-7%[1]s-8%[2]s-' || lpad(to_hex(i), 12, '0') AS e,
                   ms || '-7%[1]s-9%[2]s-' || lpad(to_hex(i), 12, '0') AS o
      FROM (SELECT i, t, overlay(lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') PLACING '-' FROM 9 FOR 0) AS ms
            FROM (SELECT i, %[3]s AS t FROM generate_series(1::bigint, %[4]d) AS i) AS g) AS m) AS s`, tag[:3], tag[3:], at, n)
}

// newTag draws the random bits of a seed's ids: six hex digits.
func newTag() string { return fmt.Sprintf("%06x", rand.Uint32N(1<<24)) }

// seedOutbox inserts n events for topic into the outbox: undispatched (a
// backlog for the relays) or, with history, dispatched 20 ms after they were
// written. It then vacuums and analyzes the table, so the run measures the
// relay, not autovacuum catching up with the seed.
func seedOutbox(ctx context.Context, conn *pgx.Conn, topic string, n int, history bool) error {
	return seedOutboxTx(ctx, conn, topic, n, 1, history)
}

// seedOutboxTx is seedOutbox in txs transactions of equal size (n must
// divide), as the peers' backlogs are written: the WAL relay and Debezium
// decode them one transaction at a time.
func seedOutboxTx(ctx context.Context, conn *pgx.Conn, topic string, n, txs int, history bool) error {
	if txs < 1 || n%txs != 0 {
		return fmt.Errorf("%d events do not split into %d equal transactions", n, txs)
	}
	dispatched := "NULL::timestamptz"
	if history {
		dispatched = "at + interval '20 milliseconds'"
	}
	for range txs {
		sql := fmt.Sprintf(`INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version,
		sequence, topic, payload, headers, occurred_at, created_at, dispatched_at)
	SELECT event_id, 'order', order_id, 'OrderCaptured', 1, 1, $1, payload, headers, at, at, %s
	FROM (%s) AS rows`, dispatched, seedRows(newTag(), n/txs, history))
		if _, err := conn.Exec(ctx, sql, topic); err != nil {
			return fmt.Errorf("seeding %d outbox rows: %w", n/txs, err)
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE outbox"); err != nil {
		return fmt.Errorf("vacuuming the outbox: %w", err)
	}
	return nil
}

// seedInbox inserts n processed events into a consumer's inbox, as the
// ledger leaves them: the inbox row and its order's applied sequence, in one
// transaction (the two SELECTs give the same rows).
func seedInbox(ctx context.Context, conn *pgx.Conn, n int) error {
	tag := newTag()
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for what, sql := range map[string]string{
			"inbox": fmt.Sprintf(`INSERT INTO inbox (event_id, event_type, source, aggregate_id, sequence, event_time,
			payload, headers, status, attempts, received_at, processed_at, topic, kafka_partition, kafka_offset)
		SELECT event_id, 'OrderCaptured', '/paylab/orders', order_id, 1, at, payload, headers,
			'processed', 1, at, at, 'order-events', i %% 6, i / 6
		FROM (%s) AS rows`, seedRows(tag, n, true)),
			"inbox_sequences": fmt.Sprintf(`INSERT INTO inbox_sequences (aggregate_id, applied_sequence, updated_at)
		SELECT order_id, 1, at FROM (%s) AS rows`, seedRows(tag, n, true)),
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("seeding %d rows of %s: %w", n, what, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE inbox, inbox_sequences"); err != nil {
		return fmt.Errorf("vacuuming the inbox: %w", err)
	}
	return nil
}
