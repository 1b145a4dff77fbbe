-- name: EnsureAccount :exec
INSERT INTO accounts (id, kind) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING;

-- name: LockAccounts :many
-- Locks the accounts of one journal entry in a fixed order (sorted ids), so
-- two entries touching the same accounts cannot deadlock.
SELECT id FROM accounts WHERE id = ANY(@ids::text[]) ORDER BY id FOR NO KEY UPDATE;

-- name: RecordCapture :exec
INSERT INTO ledger_orders (order_id, customer_account, merchant_account, currency, captured_amount)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (order_id) DO UPDATE SET captured_amount = ledger_orders.captured_amount + excluded.captured_amount;

-- name: Order :one
SELECT * FROM ledger_orders WHERE order_id = $1;

-- name: RecordRefund :exec
UPDATE ledger_orders SET refunded_amount = refunded_amount + $2 WHERE order_id = $1;

-- name: InsertEntry :one
INSERT INTO journal_entries (event_id, order_id, kind, refund_id) VALUES ($1, $2, $3, $4) RETURNING id;

-- name: InsertPosting :exec
INSERT INTO postings (entry_id, account_id, currency, amount) VALUES ($1, $2, $3, $4);

-- name: AddToBalance :exec
INSERT INTO balances (account_id, currency, balance) VALUES ($1, $2, $3)
ON CONFLICT (account_id, currency) DO UPDATE
SET balance = balances.balance + excluded.balance, updated_at = now();

-- name: Account :one
SELECT * FROM accounts WHERE id = $1;

-- name: AccountBalances :many
SELECT currency, balance FROM balances WHERE account_id = $1 ORDER BY currency;

-- name: OrderEntries :many
SELECT * FROM journal_entries WHERE order_id = $1 ORDER BY id;

-- name: OrderPostings :many
SELECT p.entry_id, p.account_id, p.currency, p.amount
FROM postings p JOIN journal_entries e ON e.id = p.entry_id
WHERE e.order_id = $1
ORDER BY p.entry_id, p.id;

-- name: PostingTotals :many
-- The ledger's invariant: every currency's postings sum to zero.
SELECT currency, sum(amount)::bigint AS total FROM postings GROUP BY currency ORDER BY currency;
