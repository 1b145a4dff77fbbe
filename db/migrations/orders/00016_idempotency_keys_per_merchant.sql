-- +goose Up
-- Idempotency-Keys belong to the merchant whose API key sent them: two
-- merchants may use the same key without seeing each other's responses.
-- Keys stored before this migration keep merchant '' and expire as usual.
ALTER TABLE idempotency_keys ADD COLUMN merchant_id text NOT NULL DEFAULT '';
ALTER TABLE idempotency_keys ALTER COLUMN merchant_id DROP DEFAULT;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey,
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (merchant_id, scope, key);

-- +goose Down
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
DELETE FROM idempotency_keys WHERE merchant_id <> '';
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (scope, key);
ALTER TABLE idempotency_keys DROP COLUMN merchant_id;
