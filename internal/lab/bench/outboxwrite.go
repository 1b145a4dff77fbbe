package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/platform/dbpool"
	"github.com/paylab/paylab/internal/platform/pgpipe"
	"github.com/paylab/paylab/pkg/outbox"
)

// C1 measures what writing the event costs the business transaction: one
// UPDATE of an order plus its one event, committed, closed loop, by each way
// of writing the event, on a fresh orders database each:
//
//	insert-only          the UPDATE and a plain single-row INSERT into the
//	                     outbox table: the baseline, nothing beyond the row
//	notify-in-tx         outbox.Enqueue as it comes: the row and a NOTIFY in
//	                     the transaction
//	notify-after-commit  Enqueue with NotifyAfterCommit and a Notifier, as the
//	                     orders service runs it
//	watermill            Watermill's SQL publisher in the same transaction
//	                     (with --peers)
//
// A relay's LISTEN connection is open throughout, as in production. The
// paylab contenders send their transaction as the orders service sends its
// own (pgpipe.Tx): BEGIN travels with the UPDATE, the event's statements
// with COMMIT, two round trips; Watermill's publisher, as a user runs it,
// sends each statement on its own (four). The contenders alternate within
// each round; each figure is the median of the rounds.

// WriteResult is one contender of C1 at one concurrency: the median round,
// and the slowest and fastest rounds' rates.
type WriteResult struct {
	Contender string `json:"contender"`
	CaptureResult
}

// The contenders of C1.
const (
	writeInsertOnly  = "insert-only"
	writeNotifyInTx  = "notify-in-tx"
	writeAfterCommit = "notify-after-commit"
	writeWatermill   = "watermill"
)

// writeOrders is how many orders each C1 database holds; the workers update
// disjoint subsets, so no transaction waits for another's row lock.
const writeOrders = 20_000

const (
	writeSeedOrders = `INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, 'cus_' || (i %% 1000), 'mer_' || (i %% 50),
       100 + (i * 7919) %% 49900, 'EUR', 'authorized'
FROM generate_series(1, %d) AS i`
	writeOrderIDs = `SELECT id::text FROM orders ORDER BY id`
	writeUpdate   = `UPDATE orders SET event_seq = event_seq + 1, version = version + 1, updated_at = now() WHERE id = $1 RETURNING event_seq`
	writeInsert   = `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, sequence, topic, payload, headers, occurred_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
)

// writePeer runs a peer's capture on a prepared database.
type writePeer func(ctx context.Context, dbURL string, workers int) (CaptureResult, error)

// outboxWrites is C1 at each concurrency; watermill, when not nil, is
// measured too.
func (e *env) outboxWrites(ctx context.Context, s Sizes, watermill writePeer) ([]WriteResult, error) {
	contenders := []string{writeInsertOnly, writeNotifyInTx, writeAfterCommit}
	if watermill != nil {
		contenders = append(contenders, writeWatermill)
	}
	var out []WriteResult
	for _, c := range s.Concurrency {
		rounds, err := alternatedByName(s.Rounds, contenders, func(round int, name string) (CaptureResult, error) {
			r, err := e.outboxWrite(ctx, s, name, c, round, watermill)
			if err != nil {
				return r, fmt.Errorf("C1 %s, concurrency %d: %w", name, c, err)
			}
			return r, nil
		})
		if err != nil {
			return out, err
		}
		for _, name := range contenders {
			w := WriteResult{Contender: name}
			w.CaptureResult, w.MinPerSecond, w.MaxPerSecond = medianSpread(rounds[name], captureRate)
			w.Rounds = len(rounds[name])
			out = append(out, w)
		}
	}
	return out, nil
}

// outboxWrite measures one contender once.
func (e *env) outboxWrite(ctx context.Context, s Sizes, name string, c, round int, watermill writePeer) (CaptureResult, error) {
	dbURL, err := e.database(ctx, fmt.Sprintf("c1c%dr%d%s", c, round, name[:2]), "orders")
	if err != nil {
		return CaptureResult{}, err
	}
	if err := withConn(ctx, dbURL, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, fmt.Sprintf(writeSeedOrders, writeOrders))
		if err == nil {
			_, err = conn.Exec(ctx, "VACUUM (ANALYZE) orders")
		}
		return err
	}); err != nil {
		return CaptureResult{}, fmt.Errorf("seeding orders: %w", err)
	}
	// Every contender starts right after a checkpoint: none pays for the
	// seed's pages, or for a checkpoint's full-page writes, that another
	// does not (a checkpoint also restarts checkpoint_timeout's clock).
	if err := e.checkpoint(ctx); err != nil {
		return CaptureResult{}, fmt.Errorf("checkpoint after the seed: %w", err)
	}
	listener, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return CaptureResult{}, err
	}
	lctx, stopListening := context.WithCancel(ctx)
	listened := make(chan struct{})
	defer func() {
		stopListening()
		<-listened
		listener.Close(context.WithoutCancel(ctx))
	}()
	if _, err := listener.Exec(ctx, "LISTEN "+outbox.DefaultTable); err != nil {
		close(listened)
		return CaptureResult{}, err
	}
	go func() { // drain the notifications, as a relay does
		defer close(listened)
		for lctx.Err() == nil {
			if _, err := listener.WaitForNotification(lctx); err != nil && lctx.Err() == nil {
				return
			}
		}
	}()
	if name == writeWatermill {
		return watermill(ctx, dbURL, c)
	}

	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return CaptureResult{}, err
	}
	cfg.MaxConns, cfg.MinConns = int32(c), int32(c)
	dbpool.Configure(cfg) // as the orders API's pool
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return CaptureResult{}, err
	}
	defer pool.Close()
	var ids []string
	if err := withConn(ctx, dbURL, func(conn *pgx.Conn) error {
		rows, _ := conn.Query(ctx, writeOrderIDs)
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	}); err != nil {
		return CaptureResult{}, fmt.Errorf("reading order ids: %w", err)
	}
	write, stop, err := writer(ctx, pool, name)
	if err != nil {
		return CaptureResult{}, err
	}
	defer stop()
	payload, headers := writeEvent()
	l := closedLoop(ctx, c, s.Warmup, s.CaptureDuration, s.MinOps, func(ctx context.Context, w, n int) error {
		id := ids[(w+n*c)%len(ids)] // worker w's own orders: w, w+c, w+2c, …
		return write(ctx, id, payload, headers)
	})
	return captureResult(c, l)
}

// writer returns contender name's transaction and what stops its helpers.
func writer(ctx context.Context, pool *pgxpool.Pool, name string) (func(ctx context.Context, id string, payload json.RawMessage, headers map[string]string) error, func(), error) {
	event := func(id string, seq int64, payload json.RawMessage, headers map[string]string) outbox.Event {
		return outbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: id, Type: "OrderCaptured",
			SchemaVersion: 1, Sequence: seq, Topic: "order-events", Payload: payload, Headers: headers, OccurredAt: time.Now()}
	}
	// tx sends the transaction as the orders service sends its own
	// (pgpipe.Tx): BEGIN with the UPDATE, the event's statements with COMMIT.
	tx := func(ctx context.Context, id string, then func(tx *pgpipe.Tx, seq int64) error) error {
		return pipelined(ctx, pool, func(tx *pgpipe.Tx) error {
			var seq int64
			if err := tx.QueryRow(ctx, writeUpdate, id).Scan(&seq); err != nil {
				return fmt.Errorf("updating order %s: %w", id, err)
			}
			if err := then(tx, seq); err != nil {
				return err
			}
			return tx.Commit(ctx)
		})
	}
	nothing := func() {}
	switch name {
	case writeInsertOnly:
		return func(ctx context.Context, id string, payload json.RawMessage, headers map[string]string) error {
			return tx(ctx, id, func(tx *pgpipe.Tx, seq int64) error {
				ev := event(id, seq, payload, headers)
				_, err := tx.Exec(ctx, writeInsert, ev.ID, ev.AggregateType, ev.AggregateID, ev.Type, ev.SchemaVersion,
					ev.Sequence, ev.Topic, ev.Payload, ev.Headers, ev.OccurredAt.UTC())
				return err
			})
		}, nothing, nil
	case writeNotifyInTx:
		return func(ctx context.Context, id string, payload json.RawMessage, headers map[string]string) error {
			return tx(ctx, id, func(tx *pgpipe.Tx, seq int64) error { return outbox.Enqueue(ctx, tx, event(id, seq, payload, headers)) })
		}, nothing, nil
	case writeAfterCommit:
		ob, stop, err := newRawOutbox(ctx, pool) // as the orders service writes
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, id string, payload json.RawMessage, headers map[string]string) error {
			if err := tx(ctx, id, func(tx *pgpipe.Tx, seq int64) error {
				return ob.writer.Enqueue(ctx, tx, event(id, seq, payload, headers))
			}); err != nil {
				return err
			}
			ob.notifier.Notify()
			return nil
		}, stop, nil
	}
	return nil, nil, fmt.Errorf("unknown contender %q", name)
}

// writeEvent is C1's event: an OrderCaptured payload and the traceparent
// header, as the orders service stores them.
func writeEvent() (json.RawMessage, map[string]string) {
	payload := json.RawMessage(`{"schema_version":1,"sequence":1,"order_id":"0193e9a4-5b7c-7def-8123-456789abcdef",` +
		`"customer_id":"cus_417","merchant_id":"mer_17","amount":24731,"currency":"EUR","captured_at":"2026-12-03T04:12:45.123456Z"}`)
	return payload, map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
}
