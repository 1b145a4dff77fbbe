-- name: EnsureAccounts :exec
-- Creates the accounts that do not exist yet, in sorted order: two
-- transactions creating the same new accounts wait for each other at the
-- first one they share instead of each holding one the other needs.
INSERT INTO accounts (id, kind)
SELECT unnest(@ids::text[]) AS id, unnest(@kinds::text[]) ORDER BY id
ON CONFLICT (id) DO NOTHING;

-- name: RecordCaptures :exec
-- Records the captured amounts of orders, one row per order (the caller
-- sums several captures of one order).
INSERT INTO ledger_orders (order_id, customer_account, merchant_account, currency, captured_amount)
SELECT unnest(@order_ids::text[]), unnest(@customer_accounts::text[]), unnest(@merchant_accounts::text[]),
       unnest(@currencies::text[]), unnest(@amounts::bigint[])
ON CONFLICT (order_id) DO UPDATE SET captured_amount = ledger_orders.captured_amount + excluded.captured_amount;

-- name: Orders :many
SELECT * FROM ledger_orders WHERE order_id = ANY(@order_ids::text[]);

-- name: RecordRefunds :exec
-- Adds refunded amounts to orders, one row per order (the caller sums).
UPDATE ledger_orders AS o
SET refunded_amount = o.refunded_amount + v.amount
FROM (SELECT unnest(@order_ids::text[]) AS order_id, unnest(@amounts::bigint[]) AS amount) AS v
WHERE o.order_id = v.order_id;

-- name: NextEntryIDs :many
-- Reserves n journal entry ids, so that a batch's entries and their postings
-- are inserted with two statements.
SELECT nextval(pg_get_serial_sequence('journal_entries', 'id'))::bigint AS id
FROM generate_series(1, @n::integer);

-- name: InsertEntries :exec
INSERT INTO journal_entries (id, event_id, order_id, kind, refund_id)
SELECT unnest(@ids::bigint[]), unnest(@event_ids::uuid[]), unnest(@order_ids::text[]), unnest(@kinds::text[]),
       NULLIF(unnest(@refund_ids::text[]), '');

-- name: InsertPostings :exec
INSERT INTO postings (entry_id, account_id, currency, amount)
SELECT unnest(@entry_ids::bigint[]), unnest(@account_ids::text[]), unnest(@currencies::text[]),
       unnest(@amounts::bigint[]);

-- name: AddToBalances :exec
-- Adds amounts to balances, one row per account and currency (the caller
-- sums), in sorted order: two transactions lock the balance rows they share
-- in the same order and cannot deadlock.
INSERT INTO balances (account_id, currency, balance)
SELECT unnest(@account_ids::text[]) AS account_id, unnest(@currencies::text[]) AS currency, unnest(@amounts::bigint[])
ORDER BY account_id, currency
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

-- name: CheckBalanced :exec
-- Runs the transaction's deferred checks (postings_balanced, the ledger's
-- only deferred constraint) now rather than at commit.
SET CONSTRAINTS ALL IMMEDIATE;

-- name: OrderMerchant :one
-- The merchant account of an order the ledger knows.
SELECT merchant_account FROM ledger_orders WHERE order_id = $1;
