-- name: InsertEvents :exec
-- Inserts a batch of events and wakes the relays, in one statement. The
-- notification is delivered when (and only if) the transaction commits, and
-- PostgreSQL folds identical notifications of one transaction into one.
WITH inserted AS (
    INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version,
                        sequence, topic, payload, headers, occurred_at)
    SELECT unnest(@event_ids::uuid[]), unnest(@aggregate_types::text[]), unnest(@aggregate_ids::text[]),
           unnest(@event_types::text[]), unnest(@schema_versions::integer[]), unnest(@sequences::bigint[]),
           unnest(@topics::text[]), unnest(@payloads::jsonb[]), unnest(@headers::jsonb[]),
           unnest(@occurred_ats::timestamptz[])
    RETURNING 1
)
SELECT pg_notify(@channel::text, '') FROM (SELECT count(*) FROM inserted) AS batch;
