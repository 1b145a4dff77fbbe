-- name: CreateAPIKey :one
INSERT INTO api_keys (id, merchant_id, name, hash)
VALUES ($1, $2, $3, $4)
RETURNING id, merchant_id, name, created_at, revoked_at;

-- name: LookupAPIKey :one
-- What a request's key is checked against: its merchant, the stored hash
-- and whether it was revoked.
SELECT merchant_id, hash, (revoked_at IS NOT NULL)::boolean AS revoked FROM api_keys WHERE id = $1;

-- name: ListAPIKeys :many
-- The keys, of one merchant when @merchant_id is not empty, oldest first.
SELECT id, merchant_id, name, created_at, revoked_at FROM api_keys
WHERE @merchant_id::text = '' OR merchant_id = @merchant_id::text
ORDER BY created_at, id;

-- name: RevokeAPIKey :execrows
-- Revokes a key, on the database clock; a revoked key stays revoked.
UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL;

-- name: InsertAPIKey :exec
-- Copies a key created in another database (the same id, merchant, name,
-- hash and times), or does nothing if this one has it.
INSERT INTO api_keys (id, merchant_id, name, hash, created_at, revoked_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO NOTHING;
