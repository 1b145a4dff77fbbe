-- +goose Up
-- The WAL relay (outbox.NewWALRelay) reads committed outbox inserts from a
-- logical replication slot. One row per slot: the lease that makes one relay
-- the slot's only reader (owner, leased_until, on the database clock; a
-- standby takes over when it expires), and the hand-over of the events that
-- were already pending when the slot was created, which the slot's stream
-- does not contain: they have an id up to handover_max_id and were created
-- at or before handover_before, and the reader publishes the ones still
-- pending before it starts streaming.
CREATE TABLE /* TEMPLATE: table */outbox_wal_readers (
    slot            text        PRIMARY KEY,
    owner           text,
    leased_until    timestamptz,
    handover_max_id bigint      NOT NULL DEFAULT 0,
    handover_before timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE /* TEMPLATE: table */outbox_wal_readers;
