-- name: TryLockIdempotencyKey :one
-- Takes a transaction-scoped advisory lock on (merchant, scope, key) without waiting:
-- false means another transaction holds it, i.e. the same key is in flight.
-- The lock is released when the transaction ends, together with the commit
-- (or rollback) of the effect and its stored response.
SELECT pg_try_advisory_xact_lock(hashtextextended(@merchant_id::text || ' ' || @scope::text || ' ' || @key::text, 0))::boolean AS acquired;

-- name: GetIdempotencyKey :one
SELECT * FROM idempotency_keys WHERE merchant_id = $1 AND scope = $2 AND key = $3;

-- name: InsertIdempotencyKey :exec
INSERT INTO idempotency_keys (merchant_id, scope, key, request_hash, response_status, response_body)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: PruneIdempotencyKeys :execrows
-- Deletes up to @batch_size keys older than @max_age_seconds on the database
-- clock. Callers repeat until fewer than batch_size rows are deleted.
DELETE FROM idempotency_keys
WHERE (merchant_id, scope, key) IN (
    SELECT merchant_id, scope, key FROM idempotency_keys
    WHERE created_at < now() - make_interval(secs => @max_age_seconds::float8)
    ORDER BY created_at
    LIMIT @batch_size::integer
);
