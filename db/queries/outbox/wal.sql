-- Queries of the WAL relay (pkg/outbox/wal*.go). The slot and the
-- publication are catalog objects, managed in walslot.go.

-- name: InitWALReader :exec
-- Records a slot's reader row with the hand-over of the events already
-- pending (their highest id, and now()), unless the row exists. Called
-- after the slot exists: every event committed before it is visible here.
INSERT INTO /* TEMPLATE: table */outbox_wal_readers (slot, handover_max_id, handover_before)
SELECT sqlc.arg(slot)::text, COALESCE(max(id), 0)::bigint, now()
FROM /* TEMPLATE: table */outbox WHERE dispatched_at IS NULL
ON CONFLICT (slot) DO NOTHING;

-- name: MarkWALHandoverDue :exec
-- Before a slot is (re)created: whatever happens next, a hand-over is due
-- (see migration 6).
INSERT INTO /* TEMPLATE: table */outbox_wal_readers (slot, handover_due)
VALUES (sqlc.arg(slot)::text, true)
ON CONFLICT (slot) DO UPDATE SET handover_due = true;

-- name: RecordWALHandover :one
-- After the slot exists: every event pending now may predate its stream,
-- so the hand-over starts again from them, under the next generation. The
-- lease is kept.
INSERT INTO /* TEMPLATE: table */outbox_wal_readers (slot, handover_max_id, handover_before, slot_generation)
SELECT sqlc.arg(slot)::text, COALESCE(max(id), 0)::bigint, now(), 1
FROM /* TEMPLATE: table */outbox WHERE dispatched_at IS NULL
ON CONFLICT (slot) DO UPDATE SET handover_max_id = EXCLUDED.handover_max_id,
                                 handover_before = EXCLUDED.handover_before,
                                 handover_due    = false,
                                 slot_generation = /* TEMPLATE: table */outbox_wal_readers.slot_generation + 1
RETURNING slot_generation;

-- name: WALReaderState :one
-- The slot's generation and hand-over, read by the reader each time it
-- attaches to the slot.
SELECT slot_generation, handover_due, handover_max_id, handover_before,
       (owner IS NOT NULL AND leased_until > now())::boolean AS leased
FROM /* TEMPLATE: table */outbox_wal_readers
WHERE slot = sqlc.arg(slot)::text;

-- name: WALTableBounds :one
-- The bounds of a publish from the table (the fallback while the slot
-- cannot be streamed): every event pending now.
SELECT COALESCE(max(id), 0)::bigint AS max_id, now()::timestamptz AS before
FROM /* TEMPLATE: table */outbox WHERE dispatched_at IS NULL;

-- name: AcquireWALLease :one
-- Takes or renews the slot's reader lease for owner until now() +
-- lease_seconds (database clock) when it is free, expired or already
-- owner's. Returns no row while another reader holds it. previous_owner is
-- the owner of the expired lease taken over, if any.
WITH prev AS (
    SELECT r.owner FROM /* TEMPLATE: table */outbox_wal_readers r
    WHERE r.slot = sqlc.arg(slot)::text FOR UPDATE
)
UPDATE /* TEMPLATE: table */outbox_wal_readers AS t
SET owner = sqlc.arg(owner)::text,
    leased_until = now() + make_interval(secs => sqlc.arg(lease_seconds)::float8)
FROM prev
WHERE t.slot = sqlc.arg(slot)::text
  AND (t.owner IS NULL OR t.owner = sqlc.arg(owner)::text OR t.leased_until IS NULL OR t.leased_until < now())
RETURNING t.handover_max_id, t.handover_before, COALESCE(NULLIF(prev.owner, sqlc.arg(owner)::text), '')::text AS previous_owner;

-- name: RenewWALLease :execrows
-- Extends owner's lease while it still holds it (not expired): 0 rows
-- means the lease is lost and the reader must stop publishing.
UPDATE /* TEMPLATE: table */outbox_wal_readers
SET leased_until = now() + make_interval(secs => sqlc.arg(lease_seconds)::float8)
WHERE slot = sqlc.arg(slot)::text AND owner = sqlc.arg(owner)::text AND leased_until > now();

-- name: ReleaseWALLease :exec
-- Gives the lease up at a clean shutdown, so a standby takes over at its
-- next poll instead of after the TTL.
UPDATE /* TEMPLATE: table */outbox_wal_readers
SET owner = NULL, leased_until = NULL
WHERE slot = sqlc.arg(slot)::text AND owner = sqlc.arg(owner)::text;

-- name: WALHandoverEvents :many
-- The next page of hand-over events: pending, not parked, committed before
-- the slot existed (id and creation bounds of the reader row), in id order.
SELECT id, event_id, aggregate_type, aggregate_id, event_type, schema_version, sequence, topic, payload,
       headers, occurred_at, created_at
FROM /* TEMPLATE: table */outbox
WHERE dispatched_at IS NULL
  AND parked_at IS NULL
  AND id > sqlc.arg(after_id)::bigint
  AND id <= sqlc.arg(max_id)::bigint
  AND created_at <= sqlc.arg(created_before)::timestamptz
ORDER BY id
LIMIT sqlc.arg(batch_size);

-- name: MarkDispatched :one
-- Marks acknowledged events dispatched, in one statement per batch. Returns
-- how many were still pending and the database's clock, for the latency.
WITH marked AS (
    UPDATE /* TEMPLATE: table */outbox
    SET dispatched_at = now()
    WHERE id = ANY(sqlc.arg(ids)::bigint[]) AND dispatched_at IS NULL
    RETURNING 1
)
SELECT (SELECT count(*) FROM marked)::bigint AS marked, now()::timestamptz AS marked_at;

-- name: DeletePublished :one
-- Deletes acknowledged events, in one statement per batch: the WAL relay's
-- default record of a publish (WALConfig.KeepDispatched marks them
-- instead). A DELETE writes no new row version and no index entries, where
-- the UPDATE writes both. Parked rows are never deleted. Returns what
-- MarkDispatched returns.
WITH deleted AS (
    DELETE FROM /* TEMPLATE: table */outbox
    WHERE id = ANY(sqlc.arg(ids)::bigint[]) AND dispatched_at IS NULL AND parked_at IS NULL
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted)::bigint AS marked, now()::timestamptz AS marked_at;

-- name: ParkEvents :execrows
-- Parks events that cannot be published (errors by position), as the
-- polling relay does: never retried, never deleted.
UPDATE /* TEMPLATE: table */outbox AS t
SET parked_at  = now(),
    attempts   = t.attempts + 1,
    last_error = left((sqlc.arg(errors)::text[])[array_position(sqlc.arg(ids)::bigint[], t.id)], 2000)
WHERE t.id = ANY(sqlc.arg(ids)::bigint[]) AND t.dispatched_at IS NULL;

-- name: ParkedAggregates :many
-- The aggregates with a parked ordered event: their later events are
-- parked too, never published out of order.
SELECT DISTINCT aggregate_type, aggregate_id
FROM /* TEMPLATE: table */outbox
WHERE dispatched_at IS NULL AND parked_at IS NOT NULL AND sequence > 0;

-- name: InvisibleTransactions :one
-- How many of the transactions xids (32-bit ids, as the replication stream
-- names them) this statement's snapshot does not see yet. A commit is
-- streamed once its WAL record is flushed, and becomes visible to other
-- sessions a moment later (after the committing backend leaves the process
-- array, or after synchronous standbys confirmed it): until then its rows
-- cannot be deleted or marked. Each id is widened to 64 bits with the epoch
-- of the snapshot's xmax, from which it is less than 2^31 away.
SELECT count(*)::bigint AS invisible
FROM unnest(sqlc.arg(xids)::bigint[]) AS x(xid),
     LATERAL (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax) AS s,
     LATERAL (SELECT ((x.xid - s.xmax % 4294967296) % 4294967296 + 4294967296) % 4294967296 AS d) AS r
WHERE NOT pg_visible_in_snapshot(
    GREATEST(s.xmax + CASE WHEN r.d >= 2147483648 THEN r.d - 4294967296 ELSE r.d END, 0)::text::xid8,
    pg_current_snapshot());

-- name: WALSweepMark :one
-- The oldest pending events and the WAL insert position, read together:
-- every one of these rows is visible, so its commit lies before lsn. Once
-- the slot's reader has confirmed lsn, each of them was streamed and
-- recorded, unless something lost it (see WALSweepEvents).
SELECT pg_current_wal_lsn()::text AS lsn,
       ARRAY(SELECT id FROM /* TEMPLATE: table */outbox
             WHERE dispatched_at IS NULL AND parked_at IS NULL
             ORDER BY id LIMIT sqlc.arg(max_rows))::bigint[] AS ids;

-- name: WALSweepEvents :many
-- Of the events a sweep mark listed, those still pending after the reader
-- confirmed the mark's position: the stream passed them without recording
-- them. They are published again, in id order.
SELECT id, event_id, aggregate_type, aggregate_id, event_type, schema_version, sequence, topic, payload,
       headers, occurred_at, created_at
FROM /* TEMPLATE: table */outbox
WHERE id = ANY(sqlc.arg(ids)::bigint[]) AND dispatched_at IS NULL AND parked_at IS NULL
ORDER BY id;

-- name: RecordFailedAttempts :execrows
-- Counts a failed attempt of events held aside for a retry (errors by
-- position); they stay pending.
UPDATE /* TEMPLATE: table */outbox AS t
SET attempts   = t.attempts + 1,
    last_error = left((sqlc.arg(errors)::text[])[array_position(sqlc.arg(ids)::bigint[], t.id)], 2000)
WHERE t.id = ANY(sqlc.arg(ids)::bigint[]) AND t.dispatched_at IS NULL AND t.parked_at IS NULL;
