package orderapp

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/pgpipe"
	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderdb"
)

// Idempotency asks for an operation to take effect at most once per key.
// The response is stored in the transaction of the effect: it exists if and
// only if the effect committed.
type Idempotency struct {
	// Merchant, Scope and Key identify the stored response: the merchant of
	// the request's API key, e.g. "POST /v1/payments", and the client's
	// Idempotency-Key. Two merchants' keys never meet.
	Merchant string
	Scope    string
	Key      string
	// RequestHash fingerprints the request; the same key with a different
	// hash is rejected with order.ErrIdempotencyKeyReused.
	RequestHash []byte
	// Encode renders the operation's result (an order.Order or an
	// order.Refund) as the response to store and return.
	Encode func(result any) (Response, error)
}

// Response is a stored response.
type Response struct {
	Status int
	Body   []byte
}

// Options are the per-call options of a state change.
type Options struct {
	// Idempotency, when not nil, makes the call idempotent.
	Idempotency *Idempotency
}

// Outcome is the result of a state change.
type Outcome[T any] struct {
	// Value is the result; zero when Replayed.
	Value T
	// Response is the stored response when the call had an idempotency key:
	// the one just stored, or the one replayed.
	Response *Response
	// Replayed is true when the key had been used before with the same
	// request: nothing happened now, Response is the first call's response.
	Replayed bool
}

// claimKey locks the key for the transaction and looks for a stored
// response. It returns the response to replay, or nil when the effect should
// run now. The lock and the lookup travel in one round trip (with BEGIN):
// two statements, so that the lookup's snapshot is taken after the lock is
// held and sees the response of a transaction that held it before; the
// lookup's result counts only if the lock was acquired.
func claimKey(ctx context.Context, tx *pgpipe.Tx, q *orderdb.Queries, idem *Idempotency) (*Response, error) {
	var acquired bool
	tx.QueueRow(orderdb.TryLockIdempotencyKeySQL, []any{idem.Merchant, idem.Scope, idem.Key},
		func(r pgx.Row) error { return r.Scan(&acquired) })
	row, err := q.GetIdempotencyKey(ctx, orderdb.GetIdempotencyKeyParams{MerchantID: idem.Merchant, Scope: idem.Scope, Key: idem.Key})
	switch {
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("locking and reading idempotency key: %w", err)
	case !acquired:
		return nil, order.ErrIdempotencyKeyInFlight
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading idempotency key: %w", err)
	}
	if !bytes.Equal(row.RequestHash, idem.RequestHash) {
		return nil, order.ErrIdempotencyKeyReused
	}
	return &Response{Status: int(row.ResponseStatus), Body: row.ResponseBody}, nil
}

// storeKey renders the result and stores it under the key.
func storeKey(ctx context.Context, q *orderdb.Queries, idem *Idempotency, result any) (*Response, error) {
	resp, err := idem.Encode(result)
	if err != nil {
		return nil, fmt.Errorf("encoding the response to store: %w", err)
	}
	err = q.InsertIdempotencyKey(ctx, orderdb.InsertIdempotencyKeyParams{
		MerchantID: idem.Merchant, Scope: idem.Scope, Key: idem.Key, RequestHash: idem.RequestHash,
		ResponseStatus: int32(resp.Status), ResponseBody: resp.Body,
	})
	if err != nil {
		return nil, fmt.Errorf("storing idempotency key: %w", translate(err))
	}
	return &resp, nil
}
