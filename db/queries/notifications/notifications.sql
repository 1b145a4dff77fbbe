-- name: RecordSent :exec
INSERT INTO notifications (event_id, order_id, kind, customer_id, recipient, message_id, subject)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: OrderCustomer :one
-- The customer of an order, from the receipt of its capture.
SELECT customer_id, recipient FROM notifications
WHERE order_id = $1 AND kind = 'capture_receipt'
ORDER BY id LIMIT 1;

-- name: SentForEvent :many
SELECT * FROM notifications WHERE event_id = $1 ORDER BY id;
