-- +goose Up
-- The transactional outbox: one row per event, inserted in the same transaction
-- as the business change. A relay publishes rows whose dispatched_at IS NULL and
-- then sets dispatched_at. Relays share the work through leases (lease_owner,
-- leased_until), which expire on the database clock.
CREATE TABLE outbox (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id       uuid        NOT NULL UNIQUE,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    event_type     text        NOT NULL,
    schema_version integer     NOT NULL DEFAULT 1,
    sequence       bigint      NOT NULL, -- per-aggregate, 1, 2, 3, ...
    topic          text        NOT NULL,
    payload        jsonb       NOT NULL,
    headers        jsonb       NOT NULL DEFAULT '{}', -- e.g. {"traceparent": "00-…"}
    occurred_at    timestamptz NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    dispatched_at  timestamptz,
    lease_owner    text,
    leased_until   timestamptz,
    attempts       integer     NOT NULL DEFAULT 0,
    last_error     text,
    parked_at      timestamptz, -- set when a row fails permanently; it is no longer retried
    UNIQUE (aggregate_type, aggregate_id, sequence)
);

-- The relay's scan touches only undispatched rows: the partial indexes stay as
-- small as the backlog, however long the dispatched history grows.
CREATE INDEX outbox_pending_idx ON outbox (id) WHERE dispatched_at IS NULL;
CREATE INDEX outbox_pending_aggregate_idx ON outbox (aggregate_type, aggregate_id, sequence)
    WHERE dispatched_at IS NULL;
-- Retention deletes dispatched rows by age.
CREATE INDEX outbox_dispatched_at_idx ON outbox (dispatched_at) WHERE dispatched_at IS NOT NULL;

-- +goose Down
DROP TABLE outbox;
