// Package inbox implements the inbox: the receiving half of effectively-once
// event processing, for events delivered at least once by Kafka.
//
// A Runner consumes a topic in a sarama consumer group. For each message it
// decodes the CloudEvents binary-mode headers (ce_id, ce_type, ce_subject,
// ce_sequence, …; docs/events.md) and, in ONE database transaction:
//
//  1. records the event under its id: INSERT … ON CONFLICT DO NOTHING, so a
//     redelivery affects no row, is counted as a duplicate and skipped;
//  2. runs the Handler registered for its type, which writes its effect with
//     the same transaction (Handler receives the pgx.Tx);
//  3. marks the inbox row processed.
//
// Only after that commit is the Kafka offset marked (sarama's auto-commit
// commits marked offsets every second and when the Runner stops). A crash at
// any point before the mark re-delivers the message; the inbox absorbs it.
//
// # Batches
//
// With Config.BatchSize > 1 the messages of a partition that are already
// waiting are processed together in ONE transaction with a fixed number of
// statements, whatever their count: one INSERT … SELECT unnest(…) ON
// CONFLICT DO NOTHING RETURNING records them all (already as processed, so
// no row is written twice), one upsert locks their aggregates' sequences in
// sorted order, the handlers run (a BatchHandler writes the whole run's
// effects in a few statements), and one UPDATE advances the sequences. The
// outcome of every message is exactly what it would be one at a time. The
// offsets are marked after the commit; a crash before it rolls the whole
// batch back and Kafka re-delivers it, and a failing batch is rolled back and
// retried message by message, so a poison message costs its batch one wasted
// attempt.
//
// # Inline, not a worker
//
// Processing is inline, in the partition's claim goroutine, rather than
// recorded first and handed to a separate inbox worker. One transaction then
// holds the dedupe, the effect and the mark, there is no second queue to
// poll, and a partition's order is kept for free. A slow handler slows its
// own partition only: the claim watches the session's context, so a
// rebalance never waits on retries (a cut-short message keeps its offset
// unmarked and is delivered again), and sarama's heartbeats run apart from
// processing, so a slow handler does not get the member evicted.
//
// # Ordering
//
// The sequence contract is the one of outbox.Event.Sequence. Events
// carrying a sequence (ce_sequence ≥ 1, with the aggregate id in
// ce_subject) are applied strictly in sequence per aggregate; the highest
// applied sequence is kept in <Table>_sequences. An event that arrives early (a
// refund before its capture, e.g. published by another relay) is recorded
// with status received — parked — and its offset is marked: the partition
// keeps moving. When the missing event is applied, the parked ones behind it
// are applied in order, each in its own transaction; a periodic sweep does the
// same after a crash. An event whose sequence was already applied is a
// duplicate. Events without a sequence (Message.Sequence 0: unordered) are
// applied as they come; a ce_sequence below 1 is undecodable.
//
// # Poison messages
//
// A message that cannot be decoded, has a type without a handler, is
// rejected by its handler (Permanent), or fails MaxAttempts times (with
// exponential backoff, inside the claim) is published to the dead-letter
// topic with the reason and its origin in headers (HeaderDLQReason, …) and
// recorded with status failed; the offset is then marked and the partition
// moves on. Errors of the inbox's own database work are not poison: they are
// retried until they succeed or the session ends. Redrive re-processes a
// failed event once an operator has fixed the cause. Later events of the same
// aggregate stay parked behind a failed one until it is re-driven: they are
// never applied out of order.
//
// # Retention
//
// Processed rows are deleted after Config.Retention (default 14 days), in bounded batches
// (Prune). The window must exceed the longest replay horizon (Kafka's log
// retention, and any offset reset an operator might do): a duplicate
// delivered after its row was pruned would not be recognised by its id.
// Sequenced events are still caught by their aggregate's applied sequence,
// which is kept.
//
// # Tracing
//
// With a global OpenTelemetry tracer provider and propagator installed,
// every delivery runs in a CONSUMER span "process <topic>", a child of the
// trace context in the message's headers, with the messaging attributes
// (topic, partition, offset, consumer group, event id) and the delivery's
// outcome (AttrOutcome: processed, duplicate, parked, dead_lettered; a
// duplicate also as a span event). The Handler's ctx carries that span, so
// the handler's own spans nest under it. A parked event applied later gets a
// span of its own (AttrDrained), a child of the context stored with it. The
// tracer is named TracerName.
//
// # Other sources
//
// NewProcessor runs the same steps on messages from any source (a queue
// other than Kafka, a webhook, a consumer of your own): Process or
// ProcessBatch each message, then acknowledge it to its source; Sweep every
// few seconds; a DeadLetterFunc of your own receives the poison messages.
// The Runner is a Processor fed by a consumer group.
//
// # Turning it off
//
// Config.Unsafe.Disabled runs each delivery's handler with no inbox at all. It
// exists only to demonstrate that duplicates then produce duplicate effects.
//
// # Schema and configuration
//
// The package owns its tables. Its migrations ship inside it
// (migrations/*.sql, embedded): Migrations(table) returns them rendered for
// a table name, in version order, for the caller's own migration tool, and
// Migrate(ctx, pool, cfg) applies them for callers without one.
// Config.Table names the inbox table (default "inbox"); the applied
// sequences live in <Table>_sequences and index names derive from it too.
// The metric names (Config.MetricPrefix) start with the table's name
// unless set.
//
// # Metrics
//
// Registered on Config.Registerer, named Config.MetricPrefix + "_…"
// (below for the default table): inbox_processed_total{type},
// inbox_duplicates_total{type}, inbox_parked_total,
// inbox_failed_total{reason}, inbox_dead_lettered_total{reason},
// inbox_pruned_total, inbox_handler_duration_seconds{type},
// inbox_consumer_lag{topic,partition}.
package inbox
