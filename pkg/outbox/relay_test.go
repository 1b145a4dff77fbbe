package outbox_test

import (
	"fmt"
	"log/slog"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// Three relays share 20 000 events of 2 000 orders (10 each; once keeping
// the published rows, once deleting them), enqueued while
// they run: every event reaches the topic, each order's events arrive in
// sequence order on one partition, and no event is sent by two relays (no
// lease expired, so any such send would have been under a valid lease).
func TestThreeRelaysPublishEveryEventInOrderOnce(t *testing.T) {
	t.Parallel()
	for _, deleting := range []bool{false, true} {
		t.Run(fmt.Sprintf("DeleteDispatched=%v", deleting), func(t *testing.T) {
			t.Parallel()
			threeRelaysPublishEveryEventInOrderOnce(t, deleting)
		})
	}
}

// threeRelaysPublishEveryEventInOrderOnce is the test, the relays'
// DeleteDispatched set to deleting.
func threeRelaysPublishEveryEventInOrderOnce(t *testing.T, deleting bool) {
	const orders, perOrder = 2000, 10
	pool, _ := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 6)
	ctx := longContext(t, 5*time.Minute)

	rec := newRecorder()
	var regs []*prometheus.Registry
	for i := range 3 {
		reg := prometheus.NewRegistry()
		regs = append(regs, reg)
		name := fmt.Sprintf("relay-%d", i)
		startRelay(t, pool, rec.wrap(name, newKafkaPublisher(t, testenv.Brokers())), outbox.RelayConfig{
			ID: name, BatchSize: 200, LeaseTTL: 30 * time.Second, PollInterval: 200 * time.Millisecond,
			Registerer: reg, Logger: testLogger(t), DeleteDispatched: deleting,
		})
	}
	ids := seedOrders(t, ctx, pool, topic, orders, perOrder)
	deadline := time.Now().Add(4 * time.Minute)
	for undispatched(t, ctx, pool) > 0 {
		if time.Now().After(deadline) {
			var pending, leased, backoff, parked int64
			_ = pool.QueryRow(ctx, `SELECT count(*),
				count(*) FILTER (WHERE lease_owner IS NOT NULL AND leased_until > now()),
				count(*) FILTER (WHERE lease_owner IS NULL AND leased_until > now()),
				count(*) FILTER (WHERE parked_at IS NOT NULL)
				FROM outbox WHERE dispatched_at IS NULL`).Scan(&pending, &leased, &backoff, &parked)
			var published []float64
			for _, reg := range regs {
				published = append(published, metricValue(t, reg, "outbox_published_total"))
			}
			rows, _ := pool.Query(ctx, `SELECT coalesce(application_name,''), state, coalesce(wait_event_type,''), coalesce(wait_event,''), (now() - query_start)::text || ' ' || left(query, 40) FROM pg_stat_activity WHERE datname = current_database()`)
			for rows.Next() {
				var a, b, c, d, e string
				_ = rows.Scan(&a, &b, &c, &d, &e)
				t.Logf("session %s %s %s %s %q", a, b, c, d, e)
			}
			rows.Close()
			t.Fatalf("not drained in 4 minutes: %d pending (%d leased, %d in backoff, %d parked); published per relay %v",
				pending, leased, backoff, parked, published)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Every event on the topic.
	byPartition := consumeAll(t, testenv.Brokers(), topic, len(ids), len(ids), time.Minute)
	onTopic, dupes := map[string]bool{}, 0
	for _, msgs := range byPartition {
		for _, m := range msgs {
			if onTopic[m.id] {
				dupes++
			}
			onTopic[m.id] = true
		}
	}
	for id := range ids {
		if !onTopic[id] {
			t.Fatalf("event %s is not on the topic (%d of %d are)", id, len(onTopic), len(ids))
		}
	}
	// Per order: one partition, sequences 1..10 in offset order.
	partitionOf, next := map[string]int32{}, map[string]int64{}
	for p, msgs := range byPartition {
		for _, m := range msgs {
			if q, ok := partitionOf[m.key]; ok && q != p {
				t.Fatalf("order %s on partitions %d and %d", m.key, q, p)
			}
			partitionOf[m.key] = p
			if m.sequence <= next[m.key] {
				continue // a duplicate of an event already seen in order
			}
			if m.sequence != next[m.key]+1 {
				t.Fatalf("order %s: sequence %d at %d/%d follows %d", m.key, m.sequence, p, m.offset, next[m.key])
			}
			next[m.key] = m.sequence
		}
	}
	if len(next) != orders {
		t.Fatalf("%d orders on the topic, want %d", len(next), orders)
	}
	// No event sent by two relays while its lease was valid: the claim only
	// takes a row whose lease expired (and counts it as a reclaim), so every
	// event sent by two relays must be matched by a reclaim. Normally there
	// are none: the lease (30 s) is far longer than a batch.
	perRelay, multi, reclaims := map[string]int{}, 0, 0.0
	for _, names := range rec.sends {
		distinct := map[string]bool{}
		for _, n := range names {
			distinct[n] = true
		}
		if len(distinct) > 1 {
			multi++
		}
		perRelay[names[0]]++
	}
	for i, reg := range regs {
		reclaims += metricValue(t, reg, "outbox_lease_reclaims_total")
		if perRelay[fmt.Sprintf("relay-%d", i)] == 0 {
			t.Logf("relay-%d published nothing", i)
		}
	}
	if float64(multi) > reclaims {
		t.Fatalf("%d events sent by two relays, but only %v leases expired: a valid lease was not respected", multi, reclaims)
	}
	if len(perRelay) < 2 {
		t.Fatalf("events per relay %v: the relays did not share the work", perRelay)
	}
	if n := queryInt(t, ctx, pool, "SELECT count(*) FROM outbox"); deleting != (n == 0) {
		t.Fatalf("%d rows left in the outbox, deleting %v", n, deleting)
	}
	t.Logf("events per relay %v, duplicates on the topic %d, sent by two relays %d, lease reclaims %v", perRelay, dupes, multi, reclaims)
}

// A transaction that commits late — after an event with a higher id was
// published — is still published: the relay scans by dispatched_at IS NULL.
// A reader that keeps an id cursor (the common bug) skips it for good.
func TestLateCommitIsPublishedWhereAnIDCursorSkipsIt(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)
	startRelay(t, pool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{PollInterval: 100 * time.Millisecond, Logger: testLogger(t)})

	// The naive reader: remembers the highest id it has read.
	var cursor int64
	naiveRead := func() map[string]bool {
		rows, err := pool.Query(ctx, "SELECT id, event_id::text FROM outbox WHERE id > $1 ORDER BY id", cursor)
		if err != nil {
			t.Fatal(err)
		}
		read := map[string]bool{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&cursor, &id); err != nil {
				t.Fatal(err)
			}
			read[id] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return read
	}

	// T1 inserts first (lower id) and stays open; T2 inserts and commits.
	late, early := event(topic, "order-late", 1), event(topic, "order-early", 1)
	t1, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Rollback(ctx) //nolint:errcheck
	if err := outbox.Enqueue(ctx, t1, late); err != nil {
		t.Fatal(err)
	}
	enqueue(t, ctx, pool, early)
	dispatched := func(e outbox.Event) bool {
		return queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE event_id = $1 AND dispatched_at IS NOT NULL", e.ID) == 1
	}
	testenv.Eventually(t, 10*time.Second, "the early event published", func() bool { return dispatched(early) })
	if first := naiveRead(); !first[early.ID.String()] || len(first) != 1 {
		t.Fatalf("naive reader read %v, want only the early event", first)
	}
	if err := t1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var lateID, earlyID int64
	_ = pool.QueryRow(ctx, "SELECT id FROM outbox WHERE event_id = $1", late.ID).Scan(&lateID)
	_ = pool.QueryRow(ctx, "SELECT id FROM outbox WHERE event_id = $1", early.ID).Scan(&earlyID)
	if lateID >= earlyID {
		t.Fatalf("late event id %d is not lower than the early one %d: the test shows nothing", lateID, earlyID)
	}

	testenv.Eventually(t, 10*time.Second, "the late event published by the relay", func() bool { return dispatched(late) })
	onTopic := consumeAll(t, testenv.Brokers(), topic, 2, 2, 30*time.Second)
	if len(onTopic[0]) < 2 {
		t.Fatalf("topic holds %v, want both events", onTopic[0])
	}
	// The other side: the id cursor has moved past the late row.
	if second := naiveRead(); second[late.ID.String()] {
		t.Fatal("the naive id-cursor reader read the late event; expected it to miss it")
	}
}

// Retention deletes dispatched events older than the limit on the database
// clock, in bounded statements, and nothing else.
func TestRetentionDeletesOnlyOldDispatchedEvents(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, migrate)
	ctx := testenv.Context(t)
	events := make([]outbox.Event, 7)
	for i := range events {
		events[i] = event("order-events", fmt.Sprintf("order-%d", i), 1)
	}
	enqueue(t, ctx, pool, events...)
	set := func(i int, sql string) {
		if _, err := pool.Exec(ctx, "UPDATE outbox SET "+sql+" WHERE event_id = $1", events[i].ID); err != nil {
			t.Fatal(err)
		}
	}
	set(0, "dispatched_at = now() - interval '2 hours'") // old: deleted
	set(1, "dispatched_at = now() - interval '3 days'")  // old: deleted
	set(2, "dispatched_at = now() - interval '61 minutes'")
	set(3, "dispatched_at = now() - interval '59 minutes'")                                 // recent: kept
	set(4, "created_at = now() - interval '3 days'")                                        // pending: kept
	set(5, "created_at = now() - interval '3 days', parked_at = now() - interval '2 days'") // parked: kept
	set(6, "dispatched_at = now()")                                                         // just now: kept

	r, err := outbox.NewRelay(pool, nil, outbox.RelayConfig{Retention: time.Hour, RetentionBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.DeleteDispatched(ctx)
	if err != nil || n != 3 {
		t.Fatalf("DeleteDispatched = %d, %v; want 3", n, err)
	}
	rows, err := pool.Query(ctx, "SELECT event_id::text FROM outbox")
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{events[3].ID.String(), events[4].ID.String(), events[5].ID.String(), events[6].ID.String()}
	sort.Strings(left)
	sort.Strings(want)
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Fatalf("rows left %v, want %v", left, want)
	}
	if n, _ := r.DeleteDispatched(ctx); n != 0 {
		t.Fatalf("second run deleted %d, want 0", n)
	}
}

// A relay runs two statements per batch, whatever its size: the claim and
// the mark, plus a few claims that find nothing (after a wake-up, at the end
// of the backlog). 2 000 events in batches of 100, on a pool that counts
// statements by name.
func TestTwoStatementsPerBatch(t *testing.T) {
	t.Parallel()
	pool, dbURL := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 3)
	ctx := longContext(t, 2*time.Minute)
	seedOrders(t, ctx, pool, topic, 2000, 1)
	relayPool, counter := testenv.CountingPool(t, dbURL)
	reg := prometheus.NewRegistry()
	startRelay(t, relayPool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{
		BatchSize: 100, Registerer: reg, Retention: -1, StatsInterval: time.Hour, Logger: testLogger(t),
	})
	testenv.Eventually(t, time.Minute, "the backlog drained", func() bool { return undispatched(t, ctx, pool) == 0 })
	batches := int(metricValue(t, reg, "outbox_batch_size"))
	byName := counter.Counts()
	claims, marks := byName["ClaimBatch"], byName["CompleteBatch"]
	t.Logf("%d batches: %d claims, %d marks; all statements %v", batches, claims, marks, byName)
	if batches < 20 || marks != batches || claims < batches || claims > batches+5 {
		t.Fatalf("%d batches of at most 100 for 2 000 events: %d claims and %d marks, want one of each per batch (and a few empty claims)",
			batches, claims, marks)
	}
	for name := range byName {
		switch name {
		case "ClaimBatch", "CompleteBatch", "other": // other: the listener's LISTEN
		case "PendingStats", "StatsSettings", "transaction": // the gauges' one refresh, in its transaction
		default:
			t.Errorf("unexpected statement %s (%d times)", name, byName[name])
		}
	}
}
