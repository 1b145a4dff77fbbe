-- +goose Up
-- Sequence 0 marks an unordered event: it is published as soon as it is
-- claimed, neither waiting for nor holding back its aggregate's other events
-- (consumers see no ce_sequence, which the inbox also reads as unordered).
-- Only ordered events (sequence ≥ 1) are unique per aggregate, so the table's
-- UNIQUE (aggregate_type, aggregate_id, sequence), named by PostgreSQL after
-- the table, becomes a partial unique index.
-- +goose StatementBegin
DO $$
DECLARE
    unique_name text;
BEGIN
    SELECT conname INTO STRICT unique_name FROM pg_constraint
    WHERE conrelid = '/* TEMPLATE: table */outbox'::regclass AND contype = 'u'
      AND pg_get_constraintdef(oid) = 'UNIQUE (aggregate_type, aggregate_id, sequence)';
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', '/* TEMPLATE: table */outbox'::regclass, unique_name);
END
$$;
-- +goose StatementEnd
CREATE UNIQUE INDEX /* TEMPLATE: table */outbox_aggregate_sequence_key
    ON /* TEMPLATE: table */outbox (aggregate_type, aggregate_id, sequence) WHERE sequence > 0;
ALTER TABLE /* TEMPLATE: table */outbox
    ADD CONSTRAINT /* TEMPLATE: table */outbox_sequence_check CHECK (sequence >= 0);

-- +goose Down
-- Fails while the table holds two unordered events of one aggregate.
ALTER TABLE /* TEMPLATE: table */outbox DROP CONSTRAINT /* TEMPLATE: table */outbox_sequence_check;
DROP INDEX /* TEMPLATE: table */outbox_aggregate_sequence_key;
ALTER TABLE /* TEMPLATE: table */outbox ADD UNIQUE (aggregate_type, aggregate_id, sequence);
