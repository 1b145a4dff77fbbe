-- name: CreateOrder :one
-- Creates an order whose payment is authorized (the card network is simulated).
INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status)
VALUES ($1, $2, $3, $4, $5, 'authorized')
RETURNING *;

-- name: GetOrder :one
SELECT * FROM orders WHERE id = $1;

-- name: CaptureOrder :one
-- Captures the full amount of an authorized order and takes the next event
-- sequence number. The status condition is the guard: of concurrent captures
-- of one order, the first to lock the row wins; the others re-check the
-- condition after it commits, match no row, and get pgx.ErrNoRows.
UPDATE orders
SET status          = 'captured',
    captured_amount = amount,
    event_seq       = event_seq + 1,
    version         = version + 1,
    updated_at      = now()
WHERE id = $1
  AND status = 'authorized'
RETURNING *;

-- name: RefundOrder :one
-- Adds a refund to a captured order, guarded so that the refunds never exceed
-- the captured amount, and takes the next event sequence number. No row when
-- the order is not refundable or the amount is too large.
UPDATE orders
SET refunded_amount = refunded_amount + @amount::bigint,
    status          = CASE WHEN refunded_amount + @amount::bigint = captured_amount
                           THEN 'refunded' ELSE 'partially_refunded' END,
    event_seq       = event_seq + 1,
    version         = version + 1,
    updated_at      = now()
WHERE id = @id
  AND status IN ('captured', 'partially_refunded')
  AND refunded_amount + @amount::bigint <= captured_amount
RETURNING *;

-- name: CreateRefund :one
INSERT INTO refunds (id, order_id, amount, currency)
VALUES ($1, $2, $3, $4)
RETURNING *;
