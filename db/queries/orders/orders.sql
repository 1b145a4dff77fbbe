-- name: CreateOrder :one
INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status)
VALUES ($1, $2, $3, $4, $5, 'authorized')
RETURNING *;

-- name: GetOrder :one
SELECT * FROM orders WHERE id = $1;
