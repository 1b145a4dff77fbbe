-- +goose Up
-- The inbox: every consumed event is recorded under its unique event id before
-- it is processed; a redelivered event hits the primary key and is skipped.
CREATE TABLE inbox (
    event_id       uuid        PRIMARY KEY,
    event_type     text        NOT NULL,
    aggregate_id   text        NOT NULL DEFAULT '',
    sequence       bigint      NOT NULL DEFAULT 0,
    payload        jsonb       NOT NULL,
    status         text        NOT NULL DEFAULT 'received'
        CHECK (status IN ('received', 'processed', 'failed')),
    attempts       integer     NOT NULL DEFAULT 0,
    received_at    timestamptz NOT NULL DEFAULT now(),
    processed_at   timestamptz,
    last_error     text,
    topic          text        NOT NULL,
    kafka_partition integer    NOT NULL,
    kafka_offset   bigint      NOT NULL
);
CREATE INDEX inbox_processed_at_idx ON inbox (processed_at) WHERE status = 'processed';
CREATE INDEX inbox_open_idx ON inbox (received_at) WHERE status <> 'processed';

-- +goose Down
DROP TABLE inbox;
