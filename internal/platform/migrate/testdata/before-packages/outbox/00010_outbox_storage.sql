-- +goose Up
-- The outbox is a queue table: every row is inserted, updated two or three
-- times (leased, dispatched) and deleted by retention. Defaults tuned for
-- large, mostly-static tables let dead tuples pile up in it, and dead entries
-- in the partial pending indexes slow every claim. So:
--  * fillfactor 80 leaves room on each page for HOT updates of the lease
--    columns (lease_owner, leased_until, attempts are not indexed);
--  * autovacuum runs after 1 000 dead rows + 1 % of the table (default 50 +
--    20 %), analyze after 1 000 + 2 %, and without cost-based sleeping, so a
--    vacuum keeps up with the relay instead of lagging behind it.
ALTER TABLE outbox SET (
    fillfactor = 80,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- +goose Down
ALTER TABLE outbox RESET (
    fillfactor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_insert_threshold,
    autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_threshold,
    autovacuum_analyze_scale_factor,
    autovacuum_vacuum_cost_delay
);
