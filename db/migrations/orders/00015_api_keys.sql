-- +goose Up
-- Merchant API keys. A key is plk_<id>_<secret>; only its SHA-256 is stored.
-- The id is public (it names the key in lists and logs) and is how a
-- request's key is found; the hash is then compared in constant time.
-- The ledger holds the same table (its read API takes the same keys):
-- paylab keys create, list and revoke act on both databases.
CREATE TABLE api_keys (
    id          text        PRIMARY KEY,
    merchant_id text        NOT NULL,
    name        text        NOT NULL DEFAULT '',
    hash        bytea       NOT NULL CHECK (length(hash) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_merchant_id_idx ON api_keys (merchant_id);

-- +goose Down
DROP TABLE api_keys;
