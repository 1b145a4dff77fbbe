// Package outbox implements the transactional outbox: the sending half of
// effectively-once event delivery.
//
// A service that decides something (capture this payment) must both change
// its database and tell other services. Two systems, no shared transaction: a
// crash between the two writes loses the event, or announces a decision that
// rolled back. The outbox closes that hole by writing the event into a table
// of the same database, in the same transaction as the business change
// (Enqueue). A Relay then publishes committed rows to Kafka and marks them
// dispatched. Publishing is at-least-once: a relay that crashes after
// publishing and before marking publishes again; consumers deduplicate with
// an inbox (package inbox) keyed by the event id.
//
// # Schema and configuration
//
// The package owns its table. Its migrations ship inside it
// (migrations/*.sql, embedded): Migrations(table) returns them rendered for
// a table name, in version order, for the caller's own migration tool, and
// Migrate(ctx, pool, cfg) applies them for callers without one. Config.Table
// names the table (default "outbox"; index names derive from it); give the
// same Config to NewWriter and Migrate, and its names to the relay
// (Config.RelayConfig, Config.WALConfig). The
// LISTEN/NOTIFY channel (Config.Channel) and the metric names
// (Config.MetricPrefix) are the table's name unless set.
//
//	if err := outbox.Migrate(ctx, pool, outbox.Config{Table: "shop_outbox"}); err != nil { … }
//	w, err := outbox.NewWriter(outbox.Config{Table: "shop_outbox"})
//	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		// … the business change, with tx …
//		return w.Enqueue(ctx, tx, outbox.Event{…})
//	})
//
// Enqueue (the package function) writes to the default table. Both take the
// caller's transaction as a Tx, which pgx.Tx satisfies.
//
// Event.Sequence is the contract with package inbox: 1, 2, 3, … per
// aggregate are published (and applied by the inbox) in that order; 0 is an
// unordered event, published without ce_sequence and applied on arrival.
//
// # The relay
//
// NewRelay(pool, publisher, RelayConfig{}) and Run(ctx). Any number of relays may
// run against one table, in one process or many. Each batch costs two
// statements:
//
//  1. Claim: one UPDATE … WHERE
//     id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING … sets
//     lease_owner = the relay's ID and leased_until = now() + LeaseTTL. Rows
//     are claimable when dispatched_at IS NULL, parked_at IS NULL and the lease
//     is absent or expired — all on the database clock, never the relays'.
//     SKIP LOCKED lets relays take disjoint batches without waiting on each
//     other. The lease columns are not indexed and the table keeps half of
//     each page free (the package's storage migration), so a claim is a HOT update that
//     rewrites each row in place.
//  2. Publish the batch asynchronously (KafkaPublisher: all messages handed to
//     a sarama AsyncProducer at once, acks collected) and record the outcome
//     in one UPDATE (CompleteBatch) that only touches rows this relay still
//     holds (lease_owner = ID): acknowledged rows get dispatched_at = now();
//     failed rows get attempts/last_error and a backoff; permanently failing
//     rows are parked (a batch that failed entirely is a broker outage:
//     attempts not counted, nothing parked; see Broker outages). This mark
//     is the expensive statement (it moves every row out of the pending
//     indexes), so Run records one batch while it claims and publishes the
//     next: a relay holds at most two batches, one being published and one
//     being marked (not after an outage batch: the relay pauses instead).
//
// # Guarantees and how they are kept
//
// No lost events. A row is marked dispatched only after the broker
// acknowledged it (the idempotent producer waits for all in-sync replicas).
// If the relay dies at any point, the row is still undispatched and its lease
// expires; another relay claims it (counted in lease_reclaims_total) and
// publishes it. The takeover takes at most LeaseTTL + PollInterval.
//
// No skipped rows. The relay does not keep an id cursor: ids are assigned at
// insert but become visible at commit, so a transaction that commits late
// would slip behind a cursor that has moved past its id. Scanning by
// dispatched_at IS NULL (served by a partial index, so the dispatched history
// costs nothing) finds every committed row, whenever it commits.
//
// Per-aggregate order with N relays. Only the lowest-sequence undispatched
// ordered event of an aggregate is claimable (unordered events, sequence 0,
// always are) (NOT EXISTS an older undispatched event
// of the same aggregate, served by the partial index on (aggregate_type,
// aggregate_id, sequence)). So an aggregate's next event is claimed only
// after the previous one was acknowledged and marked, by whichever relay:
// events reach Kafka in sequence order, on one partition (key = aggregate
// id). The cost is one event per aggregate per round trip, which is fine for
// orders (a few events each); bulk throughput comes from many aggregates per
// batch. The mechanism assumes an aggregate's events commit in sequence order
// — the orders service assigns a sequence under the order row's lock. A
// failing event blocks the later events of its own aggregate only: other
// aggregates are claimed around it.
//
// A lease is respected. Claims only take rows whose lease expired, and a
// relay records outcomes only for rows it still holds. A batch normally gets
// half the TTL to be acknowledged (PublishTimeout) and a quarter to be
// recorded. When acknowledgements are slower than that (a loaded broker or
// machine), the relay does not give up on events that are still in the
// producer — they may yet be sent, and releasing them for a retry would put
// them on the wire twice — it renews its lease on the batch every half TTL
// while it waits (one extra statement, counted in lease_renewals_total), up
// to MaxPublishWait (default four TTLs). Only a relay that stalls for longer
// than the lease, or gives up at MaxPublishWait, lets another relay publish
// the same events again — a duplicate on the wire, which the consumers'
// inboxes absorb; the late relay's outcome is then discarded. Keep the
// producer's own retries (sarama Producer.Retry, Producer.Timeout) well below
// MaxPublishWait, as the orders relay does, so that a send given up by the
// relay is not still being retried by the producer.
//
// Failures. A broker error releases the row with an exponential backoff with
// jitter (RetryBackoff doubling per attempt up to RetryMaxBackoff, times
// 0.5–1.0, computed by the database into leased_until) and records attempts
// and last_error. Errors wrapping ErrPermanent (a message too large for the
// broker, undecodable headers) park the row at once (parked_at, reason in
// last_error); so does reaching MaxAttempts. A parked row is never deleted
// and never retried; it blocks its aggregate, which the parked gauge shows.
// To retry it after fixing the cause:
//
//	UPDATE outbox SET parked_at = NULL, attempts = 0 WHERE id = …;
//
// Broker outages. A batch in which every event failed, none permanently, is
// taken for a broker outage: the Publisher interface says nothing of the
// broker's health, but when the broker is down every send fails, while an
// event refused on its own merits fails next to events that go through. An
// outage is not the events' fault, so such a batch is recorded (in the same
// single statement) without counting the attempt: the claim's increment is
// taken back, nothing is parked however long the outage lasts, last_error
// is kept, and every row is released after the relay's outage backoff
// rather than its own. The relay itself then pauses claiming for that
// backoff — RetryBackoff, doubling with each consecutive outage batch, up to
// OutageMaxBackoff (5s) — so it probes the broker with one batch per backoff
// and drains the backlog within about that long of the broker's return,
// instead of the up to RetryMaxBackoff of the per-event backoff. The first
// batch with an acknowledged event ends the outage; its start and end are
// logged and outbox_broker_outage shows it. The price of the
// heuristic: an event that keeps failing transiently while alone in its
// batches (a quiet system) is retried at the outage pace and not counted
// until it shares a batch with an event that goes through. RunBatch records
// an outage batch the same way and reports it in BatchResult.Outage; pausing
// is then the caller's.
//
// Wake-up. Enqueue sends one NOTIFY per transaction on Config.Channel (on
// commit only) — or, with Config.NotifyAfterCommit, none: the process then
// calls Notifier.Notify after each commit, and the Notifier's one NOTIFY at
// a time covers every commit made while it was on its way. The difference is
// throughput: PostgreSQL serialises the commits of all transactions that
// NOTIFY on one database-wide lock, which costs a busy writer about 40 % of
// its transactions per second. Each relay LISTENs on a dedicated connection and runs a
// round at once; lost notifications are covered by polling every
// PollInterval, and a dropped listener connection is reopened (and followed
// by a round). While rounds make progress (a full batch, or a dispatched
// event that may have made its aggregate's next event claimable) the relay
// fetches again at once.
//
// Retention. Dispatched rows older than Retention are deleted every
// RetentionInterval, RetentionBatch rows per statement (no long locks, no
// huge transactions), on the database clock. Pending and parked rows are
// never deleted. The table is a queue: migrations 2 and 3 set
// fillfactor 50 (HOT updates of the lease columns) and an aggressive autovacuum
// (vacuum after 1 000 dead rows + 1 %, analyze after 1 000 + 2 %, no cost
// delay) so dead tuples do not pile up in the partial indexes.
//
// # The WAL relay
//
// NewWALRelay(pool, replURL, publisher, WALConfig{}) and Run(ctx), with the
// same Run semantics as the polling relay (blocks until ctx ends, finishes
// the batch in flight, returns nil; errors are logged, counted, retried).
// Instead of claiming rows it reads the table's committed inserts from the
// write-ahead log through a logical replication slot (pgoutput, binary
// tuples): no claim statement, and one DELETE of the acknowledged rows per
// batch (with WALConfig.KeepDispatched, one UPDATE … SET dispatched_at
// instead, so retention and everything that reads dispatched_at work as
// with the polling relay). Requirements: wal_level=logical;
// a role with the REPLICATION attribute that owns the table (the
// publication). Run calls SetupWAL(ctx, pool, cfg) (idempotent; it may be
// called on its own too) once no polling relay runs against the table, to
// create the publication WALConfig.Publication (INSERTs only), the slot
// WALConfig.Slot (unique per server: slots are server-wide) and the slot's row
// in <table>_wal_readers. A slot that nobody reads keeps the server's WAL
// from its position on: a polling relay drops it when it starts (Running
// modes, below), and DropWAL drops it and the publication.
//
// Hand-over. A slot streams only transactions that commit after it was
// created. Every creation of the slot (by SetupWAL, or by the reader when
// the slot is missing or invalidated) marks a hand-over due, creates the
// slot, then records the highest pending id and the time under the slot's
// next generation (migration 6); before it streams a generation it has not
// handed over for, the reader publishes the events still pending within
// those bounds, in id order, through the same publish path, and it checks
// the generation again once attached. A transaction in flight while the
// slot was created may be both handed over and streamed (a duplicate).
//
// The table stays the source of truth. A commit is streamed once its WAL
// record is flushed and visible to other sessions a moment later: the
// reader records rows only once their transactions are visible
// (wal_invisible_commit_waits_total counts the waits), so it never confirms
// a position past a row it could not delete. While the slot cannot be
// streamed, the reader publishes the pending events from the table every
// PollInterval (wal_table_fallback). Every StatsInterval it checks the
// publication (exactly the table, inserts only; anything else ends the
// stream, and Ready fails) and sweeps: it lists the oldest pending events
// with the WAL position, and publishes again any still pending once the
// stream has confirmed past it (wal_swept_total, 0 unless something lost
// them). docs/wal-relay.md in the repository has the operating rules.
//
// Running modes and relay IDs. Polling relays and WAL relays never publish
// one table at once (a polling relay claims rows the stream also carries:
// duplicates, out of order), and two running relays never share an ID
// (lease fencing tells relays apart by it). Each relay's Run holds a guard
// for its lifetime: session-level advisory locks, in the table's database,
// on a connection of its own (application_name <table>-guard), in the
// two-key form, apart from the one-key locks such as SetupWAL's:
//
//	relay ID  (hashtext('outbox_relay_id:<table>'), hashtext('<ID>'))  exclusive
//	mode      (hashtext('outbox_mode:<table>'), hashtext('poll' | 'wal'))     shared by the running relays of the mode
//
// pg_locks lists them: which relays run, in which mode. A relay started with
// the ID of a running relay on the table gets ErrRelayIDInUse from Run at
// once. A relay takes its mode only while no relay of the other mode holds
// theirs, checked and taken in one transaction under a third, exclusive
// lock (…, hashtext('start')), so that two relays starting together cannot
// both pass. A polling relay started while a WAL relay (reader or standby)
// runs gets ErrWALRelayRunning. A WAL relay started while polling relays
// run waits, logs it once and is not Ready, until the last of them has
// stopped; only then does it run SetupWAL, whose hand-over covers what they
// left pending, and stream. A switch to WAL mode is thus a rolling restart:
// no event is published by both modes (a polling relay that crashed rather
// than stopped may leave published rows unmarked: duplicates). A switch
// back starts the polling relays once every WAL relay is gone; a supervisor
// that restarts failed processes starts them again until then.
//
// Retiring the slot. A polling relay that has taken its mode drops the
// slots WAL relays streamed the table from (those named in
// <table>_wal_readers) that exist in its database, and logs it: no WAL
// relay runs, and nothing would read them again before a WAL relay
// recreates one with a hand-over. The publication stays (without a slot it
// costs nothing). Dropping takes the REPLICATION attribute
// (the WAL relays' role has it); should it fail, the relay logs the error
// and polls all the same. DropWAL retires the slot without starting a
// relay.
//
// What the guard guarantees. A relay publishes while its guard's session
// holds its locks, and stops once it notices the guard lost: at once when
// the server closes the connection (a restart, a terminated backend; the
// guard reads its idle connection), and otherwise at its next check that
// the session still holds the locks (every third of LeaseTTL, with half a
// TTL to answer). The batch in flight is finished. The relay then
// reconnects and takes the guard again — its ID (for up to LeaseTTL, while
// the server ends its previous session), then its mode — and resumes; if
// another relay took the ID meanwhile, Run returns ErrRelayIDInUse, and a
// polling relay that finds a WAL relay running returns ErrWALRelayRunning.
// A relay that vanishes without closing its connection (a crashed host, a
// cut network) keeps its locks until the server ends its session: the
// guard sets the session's TCP keepalives so that this takes about three
// quarters of LeaseTTL. Run unlocks before it returns: a relay started
// after it may take its ID at once. The guard needs a connection that
// keeps its session: the database directly, or a pooler in session mode,
// not in transaction mode. Only Run takes the guard; RunBatch does not.
//
// One reader. Relays share a slot through a lease in <table>_wal_readers on
// the database clock (LeaseTTL, renewed every third of it): the holder
// streams, the others poll every PollInterval and take over when it
// expires (counted in wal_takeovers_total). The holder stops publishing a
// quarter TTL before the database would let another relay take over,
// measured from when its last successful renewal was sent, so two readers
// never publish at once (only messages already handed to the producer may
// still arrive: duplicates). PostgreSQL's refusal of a second consumer on
// the slot is treated as "not ours yet". A clean stop releases the lease.
//
// Order and position. Transactions reach the Publisher in commit order, in
// batches of up to BatchSize events (default DefaultWALBatchSize). Inside a
// batch, an aggregate's ordered events go out in waves (its first event,
// then its second, …). A publish in which every event failed, none
// permanently, is a broker outage when it is the first send of two events
// or more, or while nothing was acknowledged since the last outage publish:
// the stream waits, retrying at RetryBackoff doubling up to
// OutageMaxBackoff, attempts not counted. Any other failure is the event's
// own: its attempt is counted in the table and it is held aside while the
// stream goes on; the reader retries it from the table (RetryBackoff
// doubling up to RetryMaxBackoff) until it is acknowledged or, after
// MaxAttempts, parked; its aggregate's later events wait behind it, in
// order, or park with it, as in the polling relay. The price: an outage
// that starts right before a lone event is sent is counted for it. The
// slot's confirmed position is the end of the last transaction whose events
// were all acknowledged, held aside or parked, and recorded; only then does the reader
// send it (StandbyStatusUpdate, at most every 200 ms, and every 10 s and on
// request as a keepalive reply). After a crash, a takeover or a lost
// connection, streaming resumes from that position: unconfirmed events are
// published again, none is lost. A clean stop confirms what was published,
// so a restart re-sends at most the part of one transaction that had been
// published when it stopped. If PostgreSQL itself crashes, the slot may
// restart from its last checkpointed position: more duplicates, no loss.
//
// Parking. As in the polling relay, events that fail permanently (or
// MaxAttempts times) are parked, and so are the later ordered events of
// their aggregate. The stream does not see updates, so unparking a row does
// not retry it in this mode: re-insert it in one statement to put it back
// in the stream with its event id,
//
//	WITH p AS (DELETE FROM outbox WHERE id = … RETURNING *)
//	INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version,
//	    sequence, topic, payload, headers, occurred_at)
//	SELECT event_id, aggregate_type, aggregate_id, event_type, schema_version,
//	    sequence, topic, payload, headers, occurred_at FROM p;
//
// (the parked aggregate's later events likewise, in sequence order), then
// restart the reader, which reloads the parked aggregates.
//
// Metrics: the polling relay's where they apply (pending, oldest pending
// age, parked, published, publish errors, parked_total, batch_size,
// publish latency and duration, relay errors, retention, broker outage),
// plus, labelled with the slot, <prefix>_wal_slot_retained_wal_bytes (from
// restart_lsn: what the server keeps), _wal_slot_lag_bytes (from
// confirmed_flush_lsn: what a reader decodes to catch up),
// _wal_slot_wal_status{status}, _wal_slot_exists, _wal_slot_active and
// _wal_slot_safe_wal_size_bytes (absent without max_slot_wal_keep_size);
// and _wal_active_reader (1 on the reader, 0 on a standby),
// _wal_reconnects_total, _wal_takeovers_total, _wal_table_fallback,
// _wal_swept_total and _wal_invisible_commit_waits_total. Hooks:
// AfterPublishBeforeMark runs after a batch is acknowledged, before it is
// marked and confirmed.
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
// The gauges come from one cheap query over the partial index every
// StatsInterval. Alert on outbox_oldest_pending_age_seconds (publish
// lag) and on outbox_parked > 0.
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
// # Fault points
//
// The relay's Hooks run at relay.after_lease (a batch leased, not published: a
// crash leaves leases held by a dead relay) and
// relay.after_publish_before_mark (acknowledged, not marked: a crash puts
// duplicates on the wire). Attach fault injection to them to rehearse
// those crashes.
package outbox
