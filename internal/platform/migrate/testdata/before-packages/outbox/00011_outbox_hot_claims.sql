-- +goose Up
-- A claim rewrites the lease columns of every row it takes, and it takes
-- whole pages at a time (ids are consecutive). With fillfactor 80 a page has
-- room for the new versions of only a few of its rows, so most claims were
-- not HOT updates: each moved the row to another page and added an entry to
-- every index (about 20 buffer accesses per row instead of 2), and claims
-- cost as much as marks. Filling new pages to half leaves room for the
-- claimed version of every row on its own page; the old versions are pruned
-- when the page is next visited. The table takes up to twice the space for
-- the same rows; the relay's throughput roughly doubles (the figures are in
-- the commit that added this migration). Existing pages keep their fill
-- until they are rewritten (VACUUM FULL) or replaced by new inserts.
ALTER TABLE outbox SET (fillfactor = 50);

-- +goose Down
ALTER TABLE outbox SET (fillfactor = 80);
