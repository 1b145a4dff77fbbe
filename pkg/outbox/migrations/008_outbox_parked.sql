-- +goose Up
-- The parked events that still block their aggregates (ParkedAggregates,
-- which a WAL relay reads before it streams) and the parked gauge were found
-- by reading every pending event: with a backlog of a million, a scan of
-- about a second of CPU before the first event was published. Parked events
-- are rare, so this index is nearly always empty: a capture only tests its
-- predicate, and parking an event adds the one entry.
CREATE INDEX /* TEMPLATE: table */outbox_parked_idx
    ON /* TEMPLATE: table */outbox (aggregate_type, aggregate_id)
    WHERE dispatched_at IS NULL AND parked_at IS NOT NULL;

-- +goose Down
DROP INDEX /* TEMPLATE: table */outbox_parked_idx;
