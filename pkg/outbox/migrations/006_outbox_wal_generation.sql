-- +goose Up
-- The WAL relay's slot is (re)created only through the hand-over protocol
-- (walslot.go): handover_due is set before the slot is created, and cleared,
-- with the hand-over's bounds and the next slot_generation, once it exists.
-- A setup that died in between leaves handover_due set, and the next reader
-- records the hand-over then (later bounds only add duplicates). A reader
-- hands over again whenever slot_generation is not the one it handed over
-- for: a slot dropped and recreated under a running reader starts at the
-- current WAL, and what was committed in the gap is published from the
-- table.
ALTER TABLE /* TEMPLATE: table */outbox_wal_readers
    ADD COLUMN slot_generation bigint  NOT NULL DEFAULT 0,
    ADD COLUMN handover_due    boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE /* TEMPLATE: table */outbox_wal_readers
    DROP COLUMN slot_generation,
    DROP COLUMN handover_due;
