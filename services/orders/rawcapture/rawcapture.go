// Package rawcapture runs the SQL of one payment as POST /v1/payments sends
// it in outbox mode — the same sqlc queries, in the same order, in one
// transaction — and nothing else: no HTTP, no validation, no hooks, no error
// translation. It is the raw baseline `paylab bench` compares the orders API
// with: whatever the API costs beyond these statements is the API's own.
package rawcapture

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
	"github.com/paylab/paylab/services/orders/internal/orderdb"
)

// Scope is the idempotency scope of POST /v1/payments.
const Scope = "POST /v1/payments"

// ErrKeyInFlight: another transaction holds the idempotency key.
var ErrKeyInFlight = errors.New("idempotency key in flight")

// Capture places payment p under idempotency key and captures it, with its
// OrderCaptured event for topic, in one transaction on pool: lock the key,
// look it up, create the order, capture it, insert the outbox row (which
// queues the relays' NOTIFY), store the key and its response, commit. A key
// already stored is a replay: nothing is written, as in the API.
func Capture(ctx context.Context, pool *pgxpool.Pool, topic, key string, p loadgen.Payment) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	hash := sha256.Sum256(append([]byte(Scope+"\x00"), body...))
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := orderdb.New(tx)
		locked, err := q.TryLockIdempotencyKey(ctx, orderdb.TryLockIdempotencyKeyParams{Scope: Scope, Key: key})
		if err != nil {
			return fmt.Errorf("locking idempotency key: %w", err)
		}
		if !locked {
			return ErrKeyInFlight
		}
		if _, err := q.GetIdempotencyKey(ctx, orderdb.GetIdempotencyKeyParams{Scope: Scope, Key: key}); err == nil {
			return nil
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("reading idempotency key: %w", err)
		}
		created, err := q.CreateOrder(ctx, orderdb.CreateOrderParams{
			ID: uuid.Must(uuid.NewV7()), CustomerID: p.CustomerID, MerchantID: p.MerchantID, Amount: p.Amount, Currency: p.Currency,
		})
		if err != nil {
			return fmt.Errorf("creating order: %w", err)
		}
		row, err := q.CaptureOrder(ctx, created.ID)
		if err != nil {
			return fmt.Errorf("capturing order %s: %w", created.ID, err)
		}
		o := orderapp.FromDB(row)
		ev, err := orderapp.NewEvent(o, order.EventOrderCaptured, order.CapturedEvent(o), o.UpdatedAt)
		if err != nil {
			return err
		}
		ev.ID, ev.Topic = uuid.Must(uuid.NewV7()), topic
		if err := outbox.Enqueue(ctx, tx, ev); err != nil {
			return err
		}
		response, err := json.Marshal(row)
		if err != nil {
			return err
		}
		if err := q.InsertIdempotencyKey(ctx, orderdb.InsertIdempotencyKeyParams{
			Scope: Scope, Key: key, RequestHash: hash[:], ResponseStatus: 201, ResponseBody: response,
		}); err != nil {
			return fmt.Errorf("storing idempotency key: %w", err)
		}
		return nil
	})
}
