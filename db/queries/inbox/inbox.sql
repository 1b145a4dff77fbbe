-- name: Record :execrows
-- Records a received event; 0 rows affected means it was seen before.
INSERT INTO inbox (event_id, event_type, aggregate_id, sequence, payload, topic, kafka_partition, kafka_offset)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (event_id) DO NOTHING;
