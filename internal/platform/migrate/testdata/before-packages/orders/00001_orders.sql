-- +goose Up
-- Orders and their payments. Amounts are integers in the currency's minor unit.
CREATE TABLE orders (
    id              uuid        PRIMARY KEY,
    customer_id     text        NOT NULL,
    merchant_id     text        NOT NULL,
    amount          bigint      NOT NULL CHECK (amount > 0),
    currency        text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status          text        NOT NULL
        CHECK (status IN ('authorized', 'captured', 'partially_refunded', 'refunded')),
    captured_amount bigint      NOT NULL DEFAULT 0 CHECK (captured_amount BETWEEN 0 AND amount),
    refunded_amount bigint      NOT NULL DEFAULT 0 CHECK (refunded_amount BETWEEN 0 AND captured_amount),
    -- event_seq is the sequence number of the last event this order emitted;
    -- the next event gets event_seq + 1 (per-order ordering downstream).
    event_seq       bigint      NOT NULL DEFAULT 0,
    version         integer     NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE refunds (
    id         uuid        PRIMARY KEY,
    order_id   uuid        NOT NULL REFERENCES orders (id),
    amount     bigint      NOT NULL CHECK (amount > 0),
    currency   text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refunds_order_id_idx ON refunds (order_id);

-- A stored response per (scope, key), written in the same transaction as the
-- effect it belongs to: the row exists if and only if the effect committed.
CREATE TABLE idempotency_keys (
    scope           text        NOT NULL, -- method and route, e.g. 'POST /v1/payments'
    key             text        NOT NULL,
    request_hash    bytea       NOT NULL, -- SHA-256 of the canonical request
    response_status integer     NOT NULL,
    response_body   bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created_at_idx ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE refunds;
DROP TABLE orders;
