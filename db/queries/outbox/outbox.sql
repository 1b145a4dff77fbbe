-- name: InsertEvents :exec
-- Inserts a batch of events and, when notify is true, wakes the relays, in
-- one statement. The notification is delivered when (and only if) the
-- transaction commits, and PostgreSQL folds identical notifications of one
-- transaction into one. It costs the commit a database-wide lock (see
-- Config.NotifyAfterCommit), hence the choice.
WITH inserted AS (
    INSERT INTO /* TEMPLATE: table */outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version,
                        sequence, topic, payload, headers, occurred_at)
    SELECT unnest(@event_ids::uuid[]), unnest(@aggregate_types::text[]), unnest(@aggregate_ids::text[]),
           unnest(@event_types::text[]), unnest(@schema_versions::integer[]), unnest(@sequences::bigint[]),
           unnest(@topics::text[]), unnest(@payloads::jsonb[]), unnest(@headers::jsonb[]),
           unnest(@occurred_ats::timestamptz[])
    RETURNING 1
)
SELECT pg_notify(@channel::text, '') FROM (SELECT count(*) FROM inserted) AS batch WHERE @notify::boolean;

-- name: InsertEvent :exec
-- InsertEvents for the common case of one event: the same row and
-- notification, from plain parameters instead of one-element arrays, which
-- cost the client and the server more than the row itself.
WITH inserted AS (
    INSERT INTO /* TEMPLATE: table */outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version,
                        sequence, topic, payload, headers, occurred_at)
    VALUES (@event_id, @aggregate_type, @aggregate_id, @event_type, @schema_version,
            @sequence, @topic, @payload, @headers, @occurred_at)
    RETURNING 1
)
SELECT pg_notify(@channel::text, '') FROM inserted WHERE @notify::boolean;

-- name: InsertEventQuiet :exec
-- InsertEvent without the notification (Config.NotifyAfterCommit): a plain
-- INSERT, without the CTE and the pg_notify call that would not run.
INSERT INTO /* TEMPLATE: table */outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version,
                    sequence, topic, payload, headers, occurred_at)
VALUES (@event_id, @aggregate_type, @aggregate_id, @event_type, @schema_version,
        @sequence, @topic, @payload, @headers, @occurred_at);

-- name: ClaimBatch :many
-- Leases up to batch_size claimable events to owner for lease_seconds, in one
-- statement, on the database clock. Claimable: not dispatched, not parked, not
-- under a live lease, and the oldest undispatched event of its aggregate (so
-- an aggregate's next event is published only after the previous one was
-- acknowledged and marked: per-aggregate order with any number of relays).
-- Sequences start at 1 without gaps, so an event with sequence 1 is its
-- aggregate's oldest by definition and skips that lookup (most aggregates
-- have one event); an unordered event (sequence 0) skips it too, and does
-- not count as older for the ordered ones. A later event looks for an
-- undispatched sequence 1 by key (the unique index) and for undispatched
-- ones after it in the partial index of pending later events (migration 7:
-- a first event never enters it). SKIP LOCKED lets concurrent relays take
-- disjoint batches without waiting. reclaimed is true for rows whose
-- previous lease expired without a completion, i.e. taken over from a relay
-- that died or stalled.
WITH candidates AS (
    SELECT o.id, o.lease_owner AS previous_owner
    FROM /* TEMPLATE: table */outbox o
    WHERE o.dispatched_at IS NULL
      AND o.parked_at IS NULL
      AND (o.leased_until IS NULL OR o.leased_until < now())
      AND (o.sequence <= 1 OR (NOT EXISTS (
          SELECT 1 FROM /* TEMPLATE: table */outbox head
          WHERE head.aggregate_type = o.aggregate_type
            AND head.aggregate_id = o.aggregate_id
            AND head.sequence = 1
            AND head.sequence < o.sequence -- always true; keeps the lookup per row, never a hash of the table
            AND head.dispatched_at IS NULL)
        AND NOT EXISTS (
          SELECT 1 FROM /* TEMPLATE: table */outbox older
          WHERE older.aggregate_type = o.aggregate_type
            AND older.aggregate_id = o.aggregate_id
            AND older.sequence > 1
            AND older.sequence < o.sequence
            AND older.dispatched_at IS NULL)))
    ORDER BY o.id
    LIMIT sqlc.arg(batch_size)
    FOR UPDATE OF o SKIP LOCKED
)
UPDATE /* TEMPLATE: table */outbox AS t
SET lease_owner  = sqlc.arg(owner)::text,
    leased_until = now() + make_interval(secs => sqlc.arg(lease_seconds)::float8),
    attempts     = t.attempts + 1
FROM candidates c
WHERE t.id = ANY(ARRAY(SELECT id FROM candidates)) -- an index scan, not a hash of the table
  AND t.id = c.id
RETURNING t.id, t.event_id, t.aggregate_type, t.aggregate_id, t.event_type, t.schema_version,
          t.sequence, t.topic, t.payload, t.headers, t.occurred_at, t.created_at, t.attempts,
          (c.previous_owner IS NOT NULL)::boolean AS reclaimed;

-- name: RenewLeases :many
-- Extends owner's lease on the given events by lease_seconds from now
-- (database clock) and returns those it still held: a batch whose
-- acknowledgements are slow keeps its events instead of letting another
-- relay publish them a second time.
UPDATE /* TEMPLATE: table */outbox
SET leased_until = now() + make_interval(secs => sqlc.arg(lease_seconds)::float8)
WHERE id = ANY(sqlc.arg(ids)::bigint[])
  AND lease_owner = sqlc.arg(owner)::text
  AND dispatched_at IS NULL
RETURNING id;

-- name: CompleteBatch :many
-- Records a batch's outcome in one statement, only for rows owner still
-- holds. ids are all the batch's rows; those also in failed_ids were not
-- acknowledged (failed_errors and failed_permanent say why, by position),
-- the others were and are marked dispatched. A failed row is released with
-- an exponential, jittered backoff (backoff_seconds·2^(attempts-1), capped,
-- times 0.5–1.0) and its error recorded; a permanent error, or reaching
-- max_attempts (> 0), parks it. An outage batch (outage: every event
-- failed, the broker is down) is not the events' fault: the claim's attempt
-- is taken back, nothing is parked, and every row is released after exactly
-- outage_backoff_seconds, the relay's own pause. latency_seconds is the time
-- from the row's insert to now, on the database clock. (Looking failures up
-- by position keeps the plan an index scan on ids; failures are few.)
-- fenced is false only to show what the owner check prevents (a stalled
-- relay recording rows another relay now holds): RelayConfig.Unsafe.UnfencedComplete.
-- delete_dispatched (RelayConfig.DeleteDispatched) deletes the acknowledged
-- rows instead of marking them, so that each event costs the table one
-- write after its insert (the claim's lease) instead of two: a DELETE
-- writes no new row version and no index entries, where the mark's UPDATE
-- writes both (dispatched_at decides the partial indexes, so it is never a
-- HOT update). The failed rows are recorded the same either way, and an
-- aggregate's next event is claimable once the previous one is gone, as
-- once it is dispatched. Each statement is planned with its arguments, so
-- the branch not taken costs nothing.
WITH recorded AS (
    UPDATE /* TEMPLATE: table */outbox AS t
    SET dispatched_at = CASE WHEN array_position(sqlc.arg(failed_ids)::bigint[], t.id) IS NULL THEN now() END,
        lease_owner   = NULL,
        leased_until  = CASE WHEN array_position(sqlc.arg(failed_ids)::bigint[], t.id) IS NULL THEN NULL
                             WHEN sqlc.arg(outage)::boolean
                             THEN now() + make_interval(secs => sqlc.arg(outage_backoff_seconds)::float8)
                             ELSE now() + make_interval(secs =>
                                 least(sqlc.arg(max_backoff_seconds)::float8,
                                       sqlc.arg(backoff_seconds)::float8 * power(2, least(t.attempts - 1, 30)))
                                 * (0.5 + random() / 2)) END,
        attempts      = CASE WHEN sqlc.arg(outage)::boolean THEN greatest(t.attempts - 1, 0) ELSE t.attempts END,
        last_error    = CASE WHEN array_position(sqlc.arg(failed_ids)::bigint[], t.id) IS NULL THEN t.last_error
                             ELSE left((sqlc.arg(failed_errors)::text[])[array_position(sqlc.arg(failed_ids)::bigint[], t.id)], 2000) END,
        parked_at     = CASE WHEN array_position(sqlc.arg(failed_ids)::bigint[], t.id) IS NOT NULL
                              AND NOT sqlc.arg(outage)::boolean
                              AND ((sqlc.arg(failed_permanent)::boolean[])[array_position(sqlc.arg(failed_ids)::bigint[], t.id)]
                                   OR (sqlc.arg(max_attempts)::integer > 0 AND t.attempts >= sqlc.arg(max_attempts)::integer))
                             THEN now() END
    WHERE t.id = ANY(sqlc.arg(ids)::bigint[])
      AND (NOT sqlc.arg(delete_dispatched)::boolean OR array_position(sqlc.arg(failed_ids)::bigint[], t.id) IS NOT NULL)
      AND (t.lease_owner = sqlc.arg(owner)::text OR NOT sqlc.arg(fenced)::boolean)
      AND t.dispatched_at IS NULL
    RETURNING t.id, (t.dispatched_at IS NOT NULL)::boolean AS dispatched, (t.parked_at IS NOT NULL)::boolean AS parked,
              EXTRACT(EPOCH FROM clock_timestamp() - t.created_at)::float8 AS latency_seconds
), deleted AS (
    DELETE FROM /* TEMPLATE: table */outbox AS t
    WHERE sqlc.arg(delete_dispatched)::boolean
      AND t.id = ANY(sqlc.arg(ids)::bigint[])
      AND array_position(sqlc.arg(failed_ids)::bigint[], t.id) IS NULL
      AND (t.lease_owner = sqlc.arg(owner)::text OR NOT sqlc.arg(fenced)::boolean)
      AND t.dispatched_at IS NULL
    RETURNING t.id, true AS dispatched, false AS parked,
              EXTRACT(EPOCH FROM clock_timestamp() - t.created_at)::float8 AS latency_seconds
)
SELECT r.id, r.dispatched::boolean AS dispatched, r.parked::boolean AS parked, r.latency_seconds::float8 AS latency_seconds FROM recorded r
UNION ALL
SELECT d.id, d.dispatched::boolean, d.parked::boolean, d.latency_seconds::float8 FROM deleted d;

-- name: PendingStats :one
-- The backlog, for the gauges: undispatched events that will be published
-- (pending) and the age of the oldest of them, and parked events (each one
-- blocks the later events of its aggregate). Served by the partial index.
SELECT count(*) FILTER (WHERE parked_at IS NULL)::bigint     AS pending,
       count(*) FILTER (WHERE parked_at IS NOT NULL)::bigint AS parked,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE parked_at IS NULL)), 0)::float8
           AS oldest_pending_seconds
FROM /* TEMPLATE: table */outbox
WHERE dispatched_at IS NULL;

-- name: DeleteDispatched :execrows
-- Deletes at most batch_size events dispatched more than retention_seconds
-- ago (database clock). Undispatched and parked rows are never deleted.
DELETE FROM /* TEMPLATE: table */outbox
WHERE id IN (
    SELECT id FROM /* TEMPLATE: table */outbox
    WHERE dispatched_at < now() - make_interval(secs => sqlc.arg(retention_seconds)::float8)
    ORDER BY dispatched_at
    LIMIT sqlc.arg(batch_size)
    FOR UPDATE SKIP LOCKED);
