-- +goose Up
-- The claim's ordering check (an event is claimable only when no older
-- event of its aggregate is undispatched) looked older events up in an
-- index of every undispatched ordered event, which every capture paid for
-- with one more index entry. Most events are their aggregate's first
-- (sequence 1: an order's capture), and the unique index on (aggregate,
-- sequence) already finds an aggregate's first event by key. So the check
-- now reads sequence 1 from that unique index and only the later events
-- (sequence > 1) from a partial index, which an aggregate's first event
-- never enters: a capture writes four index entries instead of five, and the
-- check stays one probe per index however long an aggregate's history is.
-- Building the index reads the table once and blocks writes meanwhile.
CREATE INDEX /* TEMPLATE: table */outbox_pending_successor_idx
    ON /* TEMPLATE: table */outbox (aggregate_type, aggregate_id, sequence)
    WHERE dispatched_at IS NULL AND sequence > 1;
DROP INDEX /* TEMPLATE: table */outbox_pending_aggregate_idx;

-- +goose Down
CREATE INDEX /* TEMPLATE: table */outbox_pending_aggregate_idx
    ON /* TEMPLATE: table */outbox (aggregate_type, aggregate_id, sequence)
    WHERE dispatched_at IS NULL;
DROP INDEX /* TEMPLATE: table */outbox_pending_successor_idx;
