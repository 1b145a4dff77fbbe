-- name: RecordProcessed :many
-- Records a run of received events, in one statement, as processed: the
-- caller applies them in the same transaction (an event that must wait for
-- an earlier one of its aggregate is then parked with Park). Returns the ids
-- it inserted; an id seen before inserts nothing: a duplicate. Inserting the
-- final status at once spares every event a second row version. A zero
-- event time stands for none.
INSERT INTO /* TEMPLATE: table */inbox (event_id, event_type, source, aggregate_id, sequence, event_time, payload, headers,
                   topic, kafka_partition, kafka_offset, status, processed_at, attempts)
SELECT unnest(@event_ids::uuid[]), unnest(@event_types::text[]), unnest(@sources::text[]),
       unnest(@aggregate_ids::text[]), unnest(@sequences::bigint[]),
       NULLIF(unnest(@event_times::timestamptz[]), '0001-01-01 00:00:00+00'::timestamptz),
       unnest(@payloads::jsonb[]), unnest(@headers::jsonb[]), unnest(@topics::text[]),
       unnest(@kafka_partitions::integer[]), unnest(@kafka_offsets::bigint[]), 'processed', now(), 1
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id;

-- name: Park :exec
-- Turns events recorded by RecordProcessed back into parked ones (status
-- received): they wait for an earlier event of their aggregate.
UPDATE /* TEMPLATE: table */inbox SET status = 'received', processed_at = NULL, attempts = 0
WHERE event_id = ANY(@event_ids::uuid[]);

-- name: RecordFailed :exec
-- Records an event as failed (dead-lettered), whether or not it was recorded before.
INSERT INTO /* TEMPLATE: table */inbox AS i (event_id, event_type, source, aggregate_id, sequence, event_time, payload, headers,
                   topic, kafka_partition, kafka_offset, status, attempts, last_error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'failed', @attempts::integer, @last_error::text)
ON CONFLICT (event_id) DO UPDATE
SET status = 'failed', attempts = i.attempts + excluded.attempts, last_error = excluded.last_error;

-- name: Status :one
SELECT status FROM /* TEMPLATE: table */inbox WHERE event_id = $1;

-- name: MarkProcessed :exec
UPDATE /* TEMPLATE: table */inbox
SET status = 'processed', processed_at = now(), attempts = attempts + 1, last_error = NULL
WHERE event_id = $1;

-- name: RecordAttemptError :exec
UPDATE /* TEMPLATE: table */inbox SET attempts = attempts + 1, last_error = $2 WHERE event_id = $1;

-- name: EnsureSequence :exec
INSERT INTO /* TEMPLATE: table */inbox_sequences (aggregate_id) VALUES ($1) ON CONFLICT (aggregate_id) DO NOTHING;

-- name: LockSequence :one
-- Serialises the application of one aggregate's events.
SELECT applied_sequence FROM /* TEMPLATE: table */inbox_sequences WHERE aggregate_id = $1 FOR UPDATE;

-- name: LockSequences :many
-- Creates the sequences of the given aggregates if needed and locks them all,
-- in one statement and in sorted order (so two transactions cannot lock two
-- of them in opposite orders); returns their applied sequences.
INSERT INTO /* TEMPLATE: table */inbox_sequences (aggregate_id)
SELECT a FROM unnest(@aggregate_ids::text[]) AS a ORDER BY a
ON CONFLICT (aggregate_id) DO UPDATE SET aggregate_id = excluded.aggregate_id
RETURNING aggregate_id, applied_sequence;

-- name: AdvanceSequence :exec
UPDATE /* TEMPLATE: table */inbox_sequences SET applied_sequence = $2, updated_at = now() WHERE aggregate_id = $1;

-- name: AdvanceSequences :exec
UPDATE /* TEMPLATE: table */inbox_sequences AS s
SET applied_sequence = v.applied_sequence, updated_at = now()
FROM (SELECT unnest(@aggregate_ids::text[]) AS aggregate_id,
             unnest(@applied_sequences::bigint[]) AS applied_sequence) AS v
WHERE s.aggregate_id = v.aggregate_id;

-- name: ParkedNext :many
-- Which of the given aggregates have their next event (the given sequence)
-- parked: it can be applied now.
SELECT DISTINCT i.aggregate_id
FROM /* TEMPLATE: table */inbox i
JOIN (SELECT unnest(@aggregate_ids::text[]) AS aggregate_id, unnest(@sequences::bigint[]) AS sequence) AS n
  ON i.aggregate_id = n.aggregate_id AND i.sequence = n.sequence
WHERE i.status = 'received';

-- name: Parked :one
-- The parked event of an aggregate with the given sequence, if any.
SELECT * FROM /* TEMPLATE: table */inbox
WHERE aggregate_id = $1 AND sequence = $2 AND status = 'received'
LIMIT 1
FOR UPDATE;

-- name: ReadyAggregates :many
-- Aggregates whose next event is parked and can be applied now.
SELECT DISTINCT i.aggregate_id
FROM /* TEMPLATE: table */inbox i
JOIN /* TEMPLATE: table */inbox_sequences s ON s.aggregate_id = i.aggregate_id
WHERE i.status = 'received' AND i.sequence = s.applied_sequence + 1
LIMIT $1;

-- name: Lock :one
SELECT * FROM /* TEMPLATE: table */inbox WHERE event_id = $1 FOR UPDATE;

-- name: ResetFailed :execrows
-- Puts a failed event back to received for a re-drive.
UPDATE /* TEMPLATE: table */inbox SET status = 'received', attempts = 0, last_error = NULL
WHERE event_id = $1 AND status = 'failed';

-- name: PruneProcessed :execrows
-- Deletes at most @batch processed rows older than the retention window
-- (measured on the database clock).
DELETE FROM /* TEMPLATE: table */inbox
WHERE event_id IN (
    SELECT event_id FROM /* TEMPLATE: table */inbox
    WHERE status = 'processed'
      AND processed_at < now() - make_interval(secs => @retention_seconds::float8)
    ORDER BY processed_at
    LIMIT @batch::integer
);

-- name: MarkFailed :exec
UPDATE /* TEMPLATE: table */inbox SET status = 'failed', attempts = attempts + 1, last_error = $2 WHERE event_id = $1;
