-- name: Record :execrows
-- Records a received event; 0 rows affected means it was seen before.
INSERT INTO inbox (event_id, event_type, source, aggregate_id, sequence, event_time, payload, headers,
                   topic, kafka_partition, kafka_offset)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (event_id) DO NOTHING;

-- name: RecordFailed :exec
-- Records an event as failed (dead-lettered), whether or not it was recorded before.
INSERT INTO inbox (event_id, event_type, source, aggregate_id, sequence, event_time, payload, headers,
                   topic, kafka_partition, kafka_offset, status, attempts, last_error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'failed', @attempts::integer, @last_error::text)
ON CONFLICT (event_id) DO UPDATE
SET status = 'failed', attempts = inbox.attempts + excluded.attempts, last_error = excluded.last_error;

-- name: Status :one
SELECT status FROM inbox WHERE event_id = $1;

-- name: MarkProcessed :exec
UPDATE inbox
SET status = 'processed', processed_at = now(), attempts = attempts + 1, last_error = NULL
WHERE event_id = $1;

-- name: RecordAttemptError :exec
UPDATE inbox SET attempts = attempts + 1, last_error = $2 WHERE event_id = $1;

-- name: EnsureSequence :exec
INSERT INTO inbox_sequences (aggregate_id) VALUES ($1) ON CONFLICT (aggregate_id) DO NOTHING;

-- name: LockSequence :one
-- Serialises the application of one aggregate's events.
SELECT applied_sequence FROM inbox_sequences WHERE aggregate_id = $1 FOR UPDATE;

-- name: AdvanceSequence :exec
UPDATE inbox_sequences SET applied_sequence = $2, updated_at = now() WHERE aggregate_id = $1;

-- name: Parked :one
-- The parked event of an aggregate with the given sequence, if any.
SELECT * FROM inbox
WHERE aggregate_id = $1 AND sequence = $2 AND status = 'received'
LIMIT 1
FOR UPDATE;

-- name: ReadyAggregates :many
-- Aggregates whose next event is parked and can be applied now.
SELECT DISTINCT i.aggregate_id
FROM inbox i
JOIN inbox_sequences s ON s.aggregate_id = i.aggregate_id
WHERE i.status = 'received' AND i.sequence = s.applied_sequence + 1
LIMIT $1;

-- name: Lock :one
SELECT * FROM inbox WHERE event_id = $1 FOR UPDATE;

-- name: ResetFailed :execrows
-- Puts a failed event back to received for a re-drive.
UPDATE inbox SET status = 'received', attempts = 0, last_error = NULL
WHERE event_id = $1 AND status = 'failed';

-- name: PruneProcessed :execrows
-- Deletes at most @batch processed rows older than the retention window
-- (measured on the database clock).
DELETE FROM inbox
WHERE event_id IN (
    SELECT event_id FROM inbox
    WHERE status = 'processed'
      AND processed_at < now() - make_interval(secs => @retention_seconds::float8)
    ORDER BY processed_at
    LIMIT @batch::integer
);

-- name: MarkFailed :exec
UPDATE inbox SET status = 'failed', attempts = attempts + 1, last_error = $2 WHERE event_id = $1;

-- name: HasParked :one
SELECT EXISTS (
    SELECT 1 FROM inbox WHERE aggregate_id = $1 AND sequence = $2 AND status = 'received'
);
