// Package inbox implements the inbox: the receiving half of effectively-once
// event processing, for events delivered at least once.
//
// Each consumed event is recorded under its unique id in a table of the
// consumer's database, in the same transaction as its effect: a redelivered
// event hits the id and is skipped, and an aggregate's events are applied in
// their sequence (package outbox's Event.Sequence), whatever order they
// arrive in. Events come from a Kafka consumer group (Runner) or from any
// other source (Processor).
//
// This is the usage guide. GUARANTEES.md, next to this file in the module,
// says what the inbox guarantees and how each guarantee is kept (the one
// transaction, batches, ordering, poison messages, retention), and holds the
// SQL an operator runs against its tables.
//
// # Create the tables
//
// The package owns its tables. Its migrations ship inside it
// (migrations/*.sql, embedded): Migrations(table) returns them rendered for
// a table name, in version order, for your own migration tool, and
// Migrate(ctx, pool, cfg) applies them for callers without one.
// Config.Table names the inbox table (default "inbox"); the applied
// sequences live in <Table>_sequences and index names derive from it too.
// The metric names (Config.MetricPrefix) start with the table's name
// unless set.
//
// # Consume a topic
//
// NewRunner(pool, cfg) and Run(ctx): the Runner joins cfg.Group on
// cfg.Topic and, for each message, decodes its CloudEvents binary-mode
// headers (ce_id, ce_type, ce_subject, ce_sequence, …), records it, runs the
// Handler registered for its type in cfg.Handlers with the same transaction,
// marks it processed, commits, and only then marks the Kafka offset.
//
//	r, err := inbox.NewRunner(pool, inbox.Config{
//		Table: "shop_inbox", Brokers: brokers, Topic: "cart-events", Group: "billing",
//		Handlers: map[string]inbox.Handler{"CartCheckedOut": billCart},
//	})
//	err = r.Run(ctx)
//
// A Handler writes its effect with the transaction it is given (pgx.Tx) and
// nothing else: its writes and the inbox's mark commit or roll back together.
// Return Permanent(err) for an event that can never succeed (it is
// dead-lettered at once; IsPermanent tells); any other error is retried with
// backoff, up to MaxAttempts.
//
// # Batches
//
// With Config.BatchSize > 1 the messages of a partition that are already
// waiting are processed together in one transaction with a fixed number of
// statements; with Config.BatchHandler the effects of a whole run are
// written at once too. The outcome of every message is what it would be one
// at a time, and a failing batch is retried message by message. Batch only
// when handlers take the row locks they share with other partitions' batches
// in one consistent order, and have no side effect outside the transaction.
// A partition's batch smaller than BatchSize is merged with what other
// partitions have waiting at the same moment (a group commit), each
// partition still in its order; a failing merged batch is retried partition
// by partition.
//
// # Other sources
//
// NewProcessor runs the same steps on messages from any source (a queue
// other than Kafka, a webhook, a consumer of your own): build a Message
// (Decode does it for a sarama message), Process or ProcessBatch it, then
// acknowledge it to its source once an Outcome is returned; call Sweep every
// few seconds; a DeadLetterFunc of your own receives the poison messages. The
// Runner is a Processor fed by a consumer group.
//
// # Poison messages and re-drive
//
// A message that cannot be decoded, has a type without a handler, is
// rejected by its handler (Permanent), or fails MaxAttempts times is
// dead-lettered — the Runner publishes it to Config.DeadLetterTopic (default
// Topic + ".dlq") with the reason and its origin in headers
// (HeaderDLQReason, …) — and recorded as failed; the partition moves on.
// Later events of its aggregate stay parked behind it. Redrive re-processes a
// failed event once the cause is fixed.
//
// # Configuration
//
// Every zero field of Config takes the default documented on it; invalid
// fields are reported together. Besides the Kafka settings (Brokers, Topic,
// Group, Sarama, ProducerSarama) and the handlers: MaxAttempts,
// RetryBackoff, RetryMaxBackoff and HandlerTimeout (retries of a failing
// handler); Retention, RetentionInterval and RetentionBatch (how long
// processed rows are kept: longer than the longest replay horizon, such as
// Kafka's retention, or an old duplicate is not recognised by its id; Prune
// runs it by hand); SweepInterval (the safety net for parked events);
// Logger and Registerer. AfterCommit is a step boundary for fault injection
// and tests.
//
// Unsafe holds the switches that break a guarantee: Unsafe.Disabled runs
// each delivery's handler with no inbox at all, to demonstrate that
// duplicates then produce duplicate effects. Production code leaves it
// unset.
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
// # Metrics
//
// Registered on Config.Registerer, named Config.MetricPrefix + "_…"
// (below for the default table): inbox_processed_total{type},
// inbox_duplicates_total{type}, inbox_parked_total,
// inbox_failed_total{reason}, inbox_dead_lettered_total{reason},
// inbox_pruned_total, inbox_handler_duration_seconds{type},
// inbox_consumer_lag{topic,partition}.
package inbox
