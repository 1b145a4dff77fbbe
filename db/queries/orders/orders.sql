-- name: CreateOrder :one
-- Creates an order whose payment is authorized (the card network is simulated).
INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status)
VALUES ($1, $2, $3, $4, $5, 'authorized')
RETURNING *;

-- name: PlaceCapturedOrder :one
-- Creates an order and captures it in full in one statement (POST
-- /v1/payments): the row CreateOrder and then CaptureOrder leave in one
-- transaction, with the sequence number of its first event, OrderCaptured.
-- Nobody could see the order between the two, so it skips that state.
INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status, captured_amount, event_seq, version)
VALUES (@id, @customer_id, @merchant_id, @amount, @currency, 'captured', @amount, 1, 2)
RETURNING *;

-- name: GetOrder :one
-- An order of one merchant: another merchant's order is not found.
SELECT * FROM orders WHERE id = @id AND merchant_id = @merchant_id;

-- name: CaptureOrder :one
-- Captures the full amount of an authorized order and takes the next event
-- sequence number. The status condition is the guard: of concurrent captures
-- of one order, the first to lock the row wins; the others re-check the
-- condition after it commits, match no row, and get pgx.ErrNoRows. Another
-- merchant's order matches no row either.
UPDATE orders
SET status          = 'captured',
    captured_amount = amount,
    event_seq       = event_seq + 1,
    version         = version + 1,
    updated_at      = now()
WHERE id = @id
  AND merchant_id = @merchant_id
  AND status = 'authorized'
RETURNING *;

-- name: RefundOrder :one
-- Adds a refund to a captured order, guarded so that the refunds never exceed
-- the captured amount, and takes the next event sequence number. No row when
-- the order is not refundable, the amount is too large, or the order is
-- another merchant's.
UPDATE orders
SET refunded_amount = refunded_amount + @amount::bigint,
    status          = CASE WHEN refunded_amount + @amount::bigint = captured_amount
                           THEN 'refunded' ELSE 'partially_refunded' END,
    event_seq       = event_seq + 1,
    version         = version + 1,
    updated_at      = now()
WHERE id = @id
  AND merchant_id = @merchant_id
  AND status IN ('captured', 'partially_refunded')
  AND refunded_amount + @amount::bigint <= captured_amount
RETURNING *;

-- name: CreateRefund :one
INSERT INTO refunds (id, order_id, amount, currency)
VALUES ($1, $2, $3, $4)
RETURNING *;
