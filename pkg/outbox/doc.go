// Package outbox implements the transactional outbox: the sending half of
// effectively-once event delivery.
//
// A service that decides something (capture this payment) must both change
// its database and tell other services. Two systems, no shared transaction: a
// crash between the two writes loses the event, or announces a decision that
// rolled back. The outbox closes that hole by writing the event into a table
// of the same database, in the same transaction as the business change
// (Enqueue). A relay then publishes committed rows to Kafka. Publishing is
// at-least-once: a relay that crashes after publishing and before recording
// it publishes again; consumers deduplicate with an inbox (package inbox)
// keyed by the event id.
//
// This is the usage guide. GUARANTEES.md, next to this file in the module,
// says what the relays guarantee and how each guarantee is kept, and holds the
// SQL an operator runs against the table.
//
// # Create the table
//
// The package owns its table. Its migrations ship inside it
// (migrations/*.sql, embedded): Migrations(table) returns them rendered for
// a table name, in version order, for your own migration tool, and
// Migrate(ctx, pool, cfg) applies them for callers without one. Config names
// the outbox: Config.Table (default "outbox"; index names derive from it),
// and, unless set, the LISTEN/NOTIFY channel (Config.Channel) and the metric
// names (Config.MetricPrefix) are the table's name. Give the same Config to
// Migrate, NewWriter and NewNotifier, and its names to the relays
// (Config.RelayConfig, Config.WALConfig).
//
//	if err := outbox.Migrate(ctx, pool, outbox.Config{Table: "shop_outbox"}); err != nil { … }
//
// # Enqueue in your transaction
//
// NewWriter returns a Writer for a Config; Writer.Enqueue inserts events with
// the caller's transaction, so they exist only if it commits. It takes a Tx,
// which pgx.Tx satisfies. The package function Enqueue writes to the default
// table.
//
//	w, err := outbox.NewWriter(outbox.Config{Table: "shop_outbox"})
//	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		// … the business change, with tx …
//		return w.Enqueue(ctx, tx, outbox.Event{
//			AggregateType: "cart", AggregateID: cartID, Sequence: seq,
//			Type: "CartCheckedOut", Topic: "cart-events", Payload: payload,
//		})
//	})
//
// Event.ID (default: a new UUIDv7) is the id the consumers deduplicate on.
// Event.AggregateID is the Kafka message key. Event.Sequence is the contract
// with package inbox: 1, 2, 3, … per aggregate are published (and applied by
// the inbox) in that order; 0 is an unordered event, published without
// ce_sequence and applied on arrival. An aggregate's events must commit in
// sequence order: take its next sequence under a lock on the aggregate (its
// row, SELECT … FOR UPDATE) in the transaction that enqueues the event.
// Event.Headers travel with the event, e.g. the W3C traceparent of the
// request that caused it.
//
// # Run a relay
//
// A relay publishes committed events with a Publisher. NewKafkaPublisher
// wraps a sarama AsyncProducer; KafkaProducerConfig is the producer
// configuration the relay needs (idempotent, acknowledged by all in-sync
// replicas, sends bounded by the relay's lease). NewRelay(pool, publisher,
// RelayConfig{}) returns a polling relay; Run(ctx) publishes until ctx ends,
// finishes the batches in flight and returns nil; database and broker errors
// are logged, counted and retried. Any number of relays may run against one
// table, in one process or many: they share the work through leases on the
// database clock, each under its own RelayConfig.ID. Run(ctx) is the
// process's main loop; RunBatch publishes one batch, for tools and tests.
// ExampleNewRelay is a complete relay process.
//
//	producerConfig := outbox.KafkaProducerConfig(leaseTTL)
//	producerConfig.Version = sarama.V4_0_0_0
//	producer, err := sarama.NewAsyncProducer(brokers, producerConfig)
//	publisher := outbox.NewKafkaPublisher(producer, "/shop/carts")
//	relay, err := outbox.NewRelay(pool, publisher, outbox.RelayConfig{Table: "shop_outbox", LeaseTTL: leaseTTL})
//	err = relay.Run(ctx)
//
// A Publisher of your own (another broker) implements Publish: nil when
// every event was acknowledged, otherwise one error per event, nil for an
// acknowledged one; wrap an error with Permanent for an
// event that can never be published (it is parked at once instead of
// retried).
//
// # Poll or WAL
//
// Two relays find the events differently; they never publish one table at
// once.
//
// The polling relay (NewRelay, the default) claims rows with an expiring
// lease, publishes them and marks them dispatched: two statements per batch,
// any number of relays sharing the work, and nothing needed of PostgreSQL
// beyond the table. Dispatched rows are deleted after RelayConfig.Retention;
// with RelayConfig.DeleteDispatched the statement that records a batch
// deletes its published rows instead of marking them (no history kept, one
// write per event fewer).
//
// The WAL relay (NewWALRelay(pool, replURL, publisher, WALConfig{})) reads
// the table's committed inserts from the write-ahead log through a logical
// replication slot, publishes them in commit order and deletes them once
// Kafka acknowledged them (WALConfig.KeepDispatched marks them instead): no
// claim statement, about half the database CPU per event. It needs
// wal_level=logical, a role with the REPLICATION attribute (replURL), and a
// publication of the table's inserts, which Run creates with SetupWAL when
// its role owns the table (otherwise the owner runs SetupWAL). Several WAL
// relays share one slot: one reads, the others stand by and take over when
// its lease expires. A slot that nobody reads keeps the server's WAL, so
// retire it with DropWAL, or by starting a polling relay, when you leave WAL
// mode.
//
// With synchronous replication, a walsender on PostgreSQL 15 streams a
// commit before the standbys have it, so a failover could leave its events
// published and the transaction gone. WALConfig.StandbyGuard (auto by
// default) holds each transaction until every synchronous standby has
// flushed its commit; the role then needs pg_read_all_stats to read
// pg_stat_replication.
//
// Choose polling unless the database's CPU is the bound: it needs nothing of
// the server beyond the table, and a failover costs it nothing. Choose the
// WAL relay for the highest throughput at the lowest database cost, where
// you can give it a slot.
//
// # Waking the relays
//
// By default Enqueue sends one NOTIFY per transaction on Config.Channel, on
// commit; the relays LISTEN and run a round at once, and poll every
// PollInterval for anything a notification missed. PostgreSQL serialises the
// commits of all transactions that NOTIFY on one database-wide lock, which
// costs a busy writer much of its throughput: with Config.NotifyAfterCommit,
// Enqueue only inserts, and the process calls Notifier.Notify after each
// commit; one Notifier per process (NewNotifier, run for the process's
// lifetime) sends one NOTIFY at a time on a connection of its own, folding
// every commit made meanwhile into it, and no more than one per
// Config.NotifyInterval (5ms). A missed Notify costs latency, never
// an event. RelayConfig.PollOnly turns LISTEN off, where it is unavailable
// (a pooler in transaction mode). Under a steady stream of commits the
// relay starts a claim no sooner than RelayConfig.RoundInterval (20ms) after
// the previous one, so each round carries what committed meanwhile: a round
// costs two statements, a produce request and the consumers' fetches, and
// one per event or two would cost more CPU than the events themselves.
//
// # Configuration
//
// Every zero field of Config, RelayConfig and WALConfig takes the default
// documented on it; Validate reports every invalid field at once. The
// settings most deployments touch:
//
//   - LeaseTTL (default 30s): how long a dead relay's events wait before
//     another relay takes them over; half of it is a batch's publish budget,
//     so give KafkaProducerConfig the same value.
//   - BatchSize: events per batch (DefaultBatchSize; the WAL relay's
//     DefaultWALBatchSize).
//   - PollInterval (1s), RetryBackoff and RetryMaxBackoff (1s and 1m),
//     MaxAttempts: how failures are retried before an event is parked.
//   - Retention, RetentionInterval, RetentionBatch: how long dispatched rows
//     are kept.
//   - Logger and Registerer: where logs and metrics go.
//   - WALConfig.Slot and WALConfig.Publication: the WAL relay's names (a slot
//     name is unique per server).
//
// Unsafe holds the switches that break a guarantee, for demonstrations and
// fault tests only; production code leaves it unset.
//
// # The WAL relay
//
// NewWALRelay and Run, with the same Run semantics as the polling relay.
// GUARANTEES.md ("The WAL relay") describes the hand-over that covers a slot
// created after events were written, how the table stays the source of
// truth when the slot or the publication goes wrong, how one reader is
// chosen, and the confirmed position after a crash. SlotStats and SlotLag
// report the slot; Ready fails while the relay cannot publish.
//
// # Running modes and relay IDs
//
// Each relay's Run holds session advisory locks, on a connection of its own,
// on its ID and on its mode for its lifetime. A relay started with the ID of
// a running relay gets ErrRelayIDInUse; a polling relay started while a WAL
// relay runs gets ErrWALRelayRunning; a WAL relay started while polling
// relays run waits, not ready, until they have stopped. Switching modes is
// thus a rolling restart that publishes no event in both modes. The guard
// needs a connection that keeps its session (the database directly, or a
// pooler in session mode). GUARANTEES.md ("Running modes and relay IDs")
// has the locks and what they guarantee.
//
// # Metrics
//
// Registered on the relay's Registerer, named MetricPrefix + "_…"
// (below with the default prefix):
//
//	outbox_pending                       gauge      undispatched, unparked events
//	outbox_oldest_pending_age_seconds    gauge      age of the oldest of them (database clock)
//	outbox_parked                        gauge      parked events (= blocked aggregates)
//	outbox_published_total               counter    events acknowledged and marked
//	outbox_publish_errors_total{kind}    counter    unacknowledged events: transient | permanent
//	outbox_parked_total                  counter    events parked by this relay
//	outbox_lease_reclaims_total          counter    events taken over from an expired lease
//	outbox_lease_renewals_total          counter    leases renewed while slow acks were pending
//	outbox_lease_lost_total              counter    outcomes refused: the lease had moved on (a stalled relay)
//	outbox_batch_size                    histogram  events per claimed batch
//	outbox_publish_latency_seconds       histogram  insert → dispatch recorded (database clock)
//	outbox_publish_duration_seconds      histogram  one batch's publish round trip
//	outbox_relay_errors_total            counter    failed rounds (database down, injected faults)
//	outbox_retention_deleted_total       counter    rows deleted by retention
//	outbox_listener_reconnects_total     counter    LISTEN connection losses
//	outbox_broker_outage                 gauge      1 while a broker outage pauses the relay
//	outbox_outage_batches_total          counter    batches that failed entirely (not counted)
//
// The WAL relay adds the slot's gauges and its own counters
// (outbox_wal_…; GUARANTEES.md lists them). The gauges come from one cheap
// query every StatsInterval. Alert on outbox_oldest_pending_age_seconds
// (publish lag) and on outbox_parked > 0.
//
// # Tracing
//
// With a global OpenTelemetry tracer provider and propagator installed, the
// relay publishes each event in a PRODUCER span "send <topic>" (messaging
// attributes: system kafka, destination, message id = event id, key), a
// child of the trace context stored in the event's Headers (a "traceparent"
// the caller injected inside its transaction), and the Kafka message's
// traceparent header carries that span's context instead of the stored one,
// so consumers continue from the publish. Each batch has an "outbox publish
// batch" span in the relay's own trace with a link to every event's span.
// Without a provider nothing is recorded and the stored headers go out as
// they are. The tracer is named TracerName.
//
// # Hooks
//
// RelayConfig.Hooks run at the relay's step boundaries: AfterLease (a batch
// leased, not published: a crash leaves leases held by a dead relay) and
// AfterPublishBeforeMark (acknowledged, not recorded: a crash puts
// duplicates on the wire). Attach fault injection to them to rehearse those
// crashes.
package outbox
