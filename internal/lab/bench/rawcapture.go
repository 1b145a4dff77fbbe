package bench

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/pkg/outbox"
)

// B1's raw baseline: the statements one POST /v1/payments makes in outbox
// mode, written out here with plain pgx, in the same order and in one
// transaction, and nothing else — no HTTP, no validation, no hooks, no error
// translation, no spans. Whatever the API costs beyond them (S1 / B1) is the
// API's own. It is not a second implementation of the capture: it answers no
// request and nothing but the bench calls it. The orders service's own
// statements are in db/queries/orders (TryLockIdempotencyKey,
// GetIdempotencyKey, CreateOrder, CaptureOrder, InsertIdempotencyKey); the
// event row is written by outbox.Enqueue, the library call the API makes
// (one INSERT; the API wakes the relays after commit through an
// outbox.Notifier, and so does the baseline), so the baseline follows the
// outbox table wherever it goes.
const (
	// rawScope is the idempotency scope of POST /v1/payments.
	rawScope = "POST /v1/payments"

	rawLockKey  = `SELECT pg_try_advisory_xact_lock(hashtextextended($1::text || ' ' || $2::text || ' ' || $3::text, 0))`
	rawGetKey   = `SELECT response_status FROM idempotency_keys WHERE merchant_id = $1 AND scope = $2 AND key = $3`
	rawNewOrder = `INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status) VALUES ($1, $2, $3, $4, $5, 'authorized')`
	// rawCaptureIt captures the order and returns what the API builds in Go
	// from the row: the OrderCaptured payload (docs/events.md) and the order
	// for the idempotency key's stored response.
	rawCaptureIt = `UPDATE orders
SET status = 'captured', captured_amount = amount, event_seq = event_seq + 1, version = version + 1, updated_at = now()
WHERE id = $1 AND merchant_id = $2 AND status = 'authorized'
RETURNING event_seq, updated_at,
  json_build_object('schema_version', 1, 'sequence', event_seq, 'order_id', id, 'customer_id', customer_id,
    'merchant_id', merchant_id, 'amount', captured_amount, 'currency', currency, 'captured_at', updated_at),
  to_jsonb(orders.*)`
	rawInsertKey = `INSERT INTO idempotency_keys (merchant_id, scope, key, request_hash, response_status, response_body) VALUES ($1, $2, $3, $4, $5, $6)`
)

// errRawKeyInFlight: another transaction holds the idempotency key.
var errRawKeyInFlight = errors.New("idempotency key in flight")

// rawCapture places payment p under idempotency key and captures it, with
// its OrderCaptured event for topic, in one transaction on pool: lock the
// key, look it up, create the order, capture it, insert the outbox row,
// store the key and its response, commit. A key already stored is a replay:
// nothing is written, as in the API.
func rawCapture(ctx context.Context, pool *pgxpool.Pool, ob rawOutbox, topic, key string, p loadgen.Payment) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	hash := sha256.Sum256(append([]byte(rawScope+"\x00"), body...))
	enqueued := false
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, rawLockKey, p.MerchantID, rawScope, key).Scan(&locked); err != nil {
			return fmt.Errorf("locking idempotency key: %w", err)
		}
		if !locked {
			return errRawKeyInFlight
		}
		var status int32
		if err := tx.QueryRow(ctx, rawGetKey, p.MerchantID, rawScope, key).Scan(&status); err == nil {
			return nil
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("reading idempotency key: %w", err)
		}
		id := uuid.Must(uuid.NewV7())
		if _, err := tx.Exec(ctx, rawNewOrder, id, p.CustomerID, p.MerchantID, p.Amount, p.Currency); err != nil {
			return fmt.Errorf("creating order: %w", err)
		}
		var (
			seq               int64
			at                time.Time
			payload, response []byte
		)
		if err := tx.QueryRow(ctx, rawCaptureIt, id, p.MerchantID).Scan(&seq, &at, &payload, &response); err != nil {
			return fmt.Errorf("capturing order %s: %w", id, err)
		}
		if err := ob.writer.Enqueue(ctx, tx, outbox.Event{
			ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: id.String(), Type: "OrderCaptured",
			SchemaVersion: 1, Sequence: seq, Topic: topic, Payload: payload, OccurredAt: at,
		}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, rawInsertKey, p.MerchantID, rawScope, key, hash[:], 201, response); err != nil {
			return fmt.Errorf("storing idempotency key: %w", err)
		}
		enqueued = true
		return nil
	})
	if err == nil && enqueued {
		ob.notifier.Notify()
	}
	return err
}

// rawOutbox is the outbox writer and notifier of B1's pool, set as the
// orders service sets its own (outbox.Config.NotifyAfterCommit).
type rawOutbox struct {
	writer   *outbox.Writer
	notifier *outbox.Notifier
}

// newRawOutbox returns pool's rawOutbox, its notifier running until stop is
// called (stop waits for it).
func newRawOutbox(ctx context.Context, pool *pgxpool.Pool) (ob rawOutbox, stop func(), err error) {
	cfg := outbox.Config{NotifyAfterCommit: true}
	if ob.writer, err = outbox.NewWriter(cfg); err != nil {
		return ob, nil, err
	}
	if ob.notifier, err = outbox.NewNotifier(pool.Config().ConnConfig, cfg, nil); err != nil {
		return ob, nil, err
	}
	nctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = ob.notifier.Run(nctx) }()
	return ob, func() { cancel(); <-done }, nil
}
