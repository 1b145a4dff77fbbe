-- +goose Up
-- The inbox: every consumed event is recorded under its unique event id before
-- it is processed; a redelivered event hits the primary key and is skipped.
-- A row is 'received' while it waits for an earlier event of its aggregate
-- (a sequence gap), 'processed' once its effect committed, 'failed' once it
-- was dead-lettered. Processed rows are pruned after INBOX_RETENTION.
CREATE TABLE inbox (
    event_id        uuid        PRIMARY KEY,
    event_type      text        NOT NULL,
    source          text        NOT NULL DEFAULT '',
    aggregate_id    text        NOT NULL DEFAULT '',
    sequence        bigint      NOT NULL DEFAULT 0,
    event_time      timestamptz,
    payload         jsonb       NOT NULL,
    headers         jsonb       NOT NULL DEFAULT '{}',
    status          text        NOT NULL DEFAULT 'received'
        CHECK (status IN ('received', 'processed', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0,
    received_at     timestamptz NOT NULL DEFAULT now(),
    processed_at    timestamptz,
    last_error      text,
    topic           text        NOT NULL,
    kafka_partition integer     NOT NULL,
    kafka_offset    bigint      NOT NULL
);
CREATE INDEX inbox_processed_at_idx ON inbox (processed_at) WHERE status = 'processed';
-- Parked events (status received) are looked up by aggregate and sequence.
CREATE INDEX inbox_parked_idx ON inbox (aggregate_id, sequence) WHERE status = 'received';

-- The highest sequence applied per aggregate: an event is applied only when
-- its sequence is the next one, so a refund never overtakes its capture.
-- One small row per aggregate; it is not pruned.
CREATE TABLE inbox_sequences (
    aggregate_id     text        PRIMARY KEY,
    applied_sequence bigint      NOT NULL DEFAULT 0,
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE inbox_sequences;
DROP TABLE inbox;
