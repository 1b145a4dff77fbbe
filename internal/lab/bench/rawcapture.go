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
	"github.com/paylab/paylab/internal/platform/pgpipe"
	"github.com/paylab/paylab/pkg/outbox"
)

// B1's raw baseline: the statements one POST /v1/payments makes in outbox
// mode, written out here with plain pgx, in the same order, in one
// transaction and in the same three round trips (BEGIN with the key's lock
// and lookup; the captured order; the key, the outbox row and COMMIT in one
// pipeline), and nothing else — no HTTP, no validation, no hooks, no
// error translation, no spans. Whatever the API costs beyond them (S1 / B1)
// is the API's own. It is not a second implementation of the capture: it
// answers no request and nothing but the bench calls it. The orders
// service's own statements are in db/queries/orders (TryLockIdempotencyKey,
// GetIdempotencyKey, PlaceCapturedOrder, InsertIdempotencyKey), its round
// trips in services/orders/internal/orderapp/pipetx.go; the event row is
// written by outbox.Enqueue, the library call the API makes (one INSERT; the
// API wakes the relays after commit through an outbox.Notifier, and so does
// the baseline), so the baseline follows the outbox table wherever it goes.
const (
	// rawScope is the idempotency scope of POST /v1/payments.
	rawScope = "POST /v1/payments"

	rawLockKey = `SELECT pg_try_advisory_xact_lock(hashtextextended($1::text || ' ' || $2::text || ' ' || $3::text, 0))`
	rawGetKey  = `SELECT response_status FROM idempotency_keys WHERE merchant_id = $1 AND scope = $2 AND key = $3`
	// rawPlaceCaptured creates the order captured and returns what the API
	// builds in Go from the row: the OrderCaptured payload (docs/events.md)
	// and the order for the idempotency key's stored response.
	rawPlaceCaptured = `INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status, captured_amount, event_seq, version)
VALUES ($1, $2, $3, $4, $5, 'captured', $4, 1, 2)
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
// key, look it up, create the order captured, store the key and its
// response, insert the outbox row, commit. A key already stored is a replay:
// nothing is written, as in the API. It returns the order, as JSON (nil on
// a replay).
func rawCapture(ctx context.Context, pool *pgxpool.Pool, ob rawOutbox, topic, key string, p loadgen.Payment) ([]byte, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	hash := sha256.Sum256(append([]byte(rawScope+"\x00"), body...))
	var order []byte
	err = pipelined(ctx, pool, func(tx *pgpipe.Tx) (err error) {
		order, err = rawCaptureTx(ctx, tx, ob, topic, key, hash[:], p)
		return err
	})
	return order, err
}

// rawCaptureTx is rawCapture's transaction; it commits unless the key was
// stored or is in flight (then pipelined rolls it back).
func rawCaptureTx(ctx context.Context, tx *pgpipe.Tx, ob rawOutbox, topic, key string, hash []byte, p loadgen.Payment) ([]byte, error) {
	var (
		locked bool
		status int32
	)
	tx.QueueRow(rawLockKey, []any{p.MerchantID, rawScope, key}, func(r pgx.Row) error { return r.Scan(&locked) })
	err := tx.QueryRow(ctx, rawGetKey, p.MerchantID, rawScope, key).Scan(&status)
	switch {
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("locking and reading idempotency key: %w", err)
	case !locked:
		return nil, errRawKeyInFlight
	case err == nil:
		return nil, nil
	}
	id := uuid.Must(uuid.NewV7())
	var (
		seq               int64
		at                time.Time
		payload, response []byte
	)
	if err := tx.QueryRow(ctx, rawPlaceCaptured, id, p.CustomerID, p.MerchantID, p.Amount, p.Currency).
		Scan(&seq, &at, &payload, &response); err != nil {
		return nil, fmt.Errorf("placing order %s: %w", id, err)
	}
	_, _ = tx.Exec(ctx, rawInsertKey, p.MerchantID, rawScope, key, hash, 201, response)
	if err := ob.writer.Enqueue(ctx, tx, outbox.Event{
		ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: id.String(), Type: "OrderCaptured",
		SchemaVersion: 1, Sequence: seq, Topic: topic, Payload: payload, OccurredAt: at,
	}); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("committing: %w", err)
	}
	ob.notifier.Notify()
	return response, nil
}

// pipelined runs fn in a pgpipe.Tx on a connection of pool, as the orders
// service runs its transactions; fn commits, and whatever it leaves open is
// rolled back.
func pipelined(ctx context.Context, pool *pgxpool.Pool, fn func(tx *pgpipe.Tx) error) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	tx := pgpipe.Begin(conn.Conn())
	defer func() {
		if rerr := tx.Rollback(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			err = errors.Join(err, rerr)
		}
	}()
	return fn(tx)
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
