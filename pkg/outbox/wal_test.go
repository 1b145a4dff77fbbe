package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// walSetup gives a test a database whose role may read replication
// slots, a slot and publication of its own (created with SetupWAL, dropped
// at cleanup after the test's relays stopped) and a topic. cfg carries the
// slot's name.
type walFixture struct {
	pool  *pgxpool.Pool
	admin *pgxpool.Pool // superuser, on the same database
	url   string
	topic string
	cfg   outbox.WALConfig
}

func walSetup(t *testing.T, partitions int32) *walFixture {
	t.Helper()
	return walSetupAfter(t, partitions, nil)
}

// walSetupAfter is walSetup with beforeSlot run on the database and topic
// before the slot is created.
func walSetupAfter(t *testing.T, partitions int32, beforeSlot func(pool *pgxpool.Pool, topic string)) *walFixture {
	t.Helper()
	// The tests' role streams the slot: it has the REPLICATION attribute.
	pool, url := testenv.NewPool(t, migrate)
	return walFixtureOn(t, testenv.AdminURL(), pool, url, partitions, beforeSlot)
}

// walFixtureOn completes a WAL fixture on the database that pool
// and url reach, on the server that adminURL administers.
func walFixtureOn(t *testing.T, adminURL string, pool *pgxpool.Pool, url string, partitions int32, beforeSlot func(pool *pgxpool.Pool, topic string)) *walFixture {
	t.Helper()
	ctx := testenv.Context(t)
	adminCfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	adminCfg.ConnConfig.Database = pool.Config().ConnConfig.Database
	admin, err := pgxpool.NewWithConfig(ctx, adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	f := &walFixture{pool: pool, admin: admin, url: url, topic: testenv.NewTopic(t, partitions),
		cfg: outbox.WALConfig{Slot: "t_wal_" + uuid.NewString()[:8]}}
	// The relay deletes what it published (unless KeepDispatched): a
	// trigger keeps the deleted ids, so dispatched counts them.
	if _, err := admin.Exec(ctx, `CREATE TABLE outbox_deleted (id bigint PRIMARY KEY);
		CREATE FUNCTION outbox_deleted() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN INSERT INTO outbox_deleted VALUES (OLD.id); RETURN OLD; END$$;
		CREATE TRIGGER outbox_deleted AFTER DELETE ON outbox FOR EACH ROW EXECUTE FUNCTION outbox_deleted();
		GRANT SELECT, INSERT ON outbox_deleted TO `+pgx.Identifier{pool.Config().ConnConfig.User}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if beforeSlot != nil {
		beforeSlot(pool, f.topic)
	}
	if err := outbox.SetupWAL(ctx, pool, f.cfg); err != nil {
		t.Fatal(err)
	}
	// Registered before the relays start, so it runs after they stopped.
	t.Cleanup(func() { f.dropSlot(t) })
	return f
}

// dropSlot drops the test's slot, ending a walsender still attached to it.
func (f *walFixture) dropSlot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		_, _ = f.admin.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active", f.cfg.Slot)
		if err = outbox.DropWAL(ctx, f.admin, f.cfg); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("dropping slot %s: %v", f.cfg.Slot, err)
}

// config returns the fixture's config for a relay named id.
func (f *walFixture) config(t *testing.T, id string, reg prometheus.Registerer) outbox.WALConfig {
	c := f.cfg
	c.ID, c.Registerer, c.Logger = id, reg, testLogger(t)
	c.BatchSize, c.LeaseTTL, c.PollInterval = 500, 3*time.Second, 100*time.Millisecond
	c.RetryBackoff, c.OutageMaxBackoff = 50*time.Millisecond, 200*time.Millisecond
	return c
}

// pollConfig returns a polling relay's config named id, tuned as config's.
func (f *walFixture) pollConfig(t *testing.T, id string) outbox.RelayConfig {
	return outbox.RelayConfig{ID: id, Logger: testLogger(t), BatchSize: 500, LeaseTTL: 3 * time.Second,
		PollInterval: 100 * time.Millisecond, RetryBackoff: 50 * time.Millisecond, OutageMaxBackoff: 200 * time.Millisecond}
}

// runningRelay is a WAL relay running in the test's process.
type runningRelay struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// stop stops the relay cleanly and returns Run's error.
func (rr *runningRelay) stop() error {
	rr.once.Do(func() { rr.cancel(); rr.err = <-rr.done })
	return rr.err
}

// startWALRelay runs a WAL relay until the test ends (or stop).
func startWALRelay(t *testing.T, f *walFixture, pub outbox.Publisher, cfg outbox.WALConfig) *runningRelay {
	t.Helper()
	r, err := outbox.NewWALRelay(f.pool, f.url, pub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr := &runningRelay{cancel: cancel, done: make(chan error, 1)}
	go func() { rr.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		if err := rr.stop(); err != nil {
			t.Errorf("WAL relay %s: %v", cfg.ID, err)
		}
	})
	return rr
}

func dispatched(t testing.TB, ctx context.Context, pool *pgxpool.Pool) int64 {
	t.Helper()
	return queryInt(t, ctx, pool, `SELECT (SELECT count(*) FROM outbox WHERE dispatched_at IS NOT NULL)
		+ (SELECT count(*) FROM outbox_deleted)`)
}

// The WAL relay deletes the rows it published, or with KeepDispatched
// keeps them marked dispatched; a parked row stays in either case.
func TestWALRelayDeletesOrKeepsWhatItPublished(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			f := walSetup(t, 1)
			ctx := testenv.Context(t)
			cfg := f.config(t, "reader", prometheus.NewRegistry())
			cfg.KeepDispatched = keep
			refused := event(f.topic, "order-refused", 1)
			pub := outbox.PublisherFunc(func(ctx context.Context, events []outbox.Event) []error {
				errs := make([]error, len(events))
				for i := range events {
					if events[i].ID == refused.ID {
						errs[i] = outbox.Permanent(errors.New("refused"))
					}
				}
				return errs
			})
			startWALRelay(t, f, pub, cfg)
			ids := seedBacklog(t, ctx, f.pool, f.topic, "order", 99, 33)
			enqueue(t, ctx, f.pool, refused)
			testenv.Eventually(t, time.Minute, "every event published or parked", func() bool {
				return dispatched(t, ctx, f.pool) == int64(len(ids)) &&
					queryInt(t, ctx, f.pool, "SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL") == 1
			})
			rows := queryInt(t, ctx, f.pool, "SELECT count(*) FROM outbox")
			want := int64(1)
			if keep {
				want += int64(len(ids))
			}
			if rows != want {
				t.Errorf("%d rows left in the outbox, want %d", rows, want)
			}
		})
	}
}

// seedBacklog commits n events, each the first of its own order (named
// prefix-<i>), in transactions of perTx events, and returns their ids.
func seedBacklog(t *testing.T, ctx context.Context, pool *pgxpool.Pool, topic, prefix string, n, perTx int) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for start := 0; start < n; start += perTx {
		batch := make([]outbox.Event, 0, perTx)
		for i := start; i < min(start+perTx, n); i++ {
			e := event(topic, fmt.Sprintf("%s-%06d", prefix, i), 1)
			batch = append(batch, e)
			ids[e.ID.String()] = true
		}
		enqueue(t, ctx, pool, batch...)
	}
	return ids
}

// checkTopic fails the test unless every id is on the topic and, when
// perOrder > 0, each order's first deliveries are its sequences 1 …
// perOrder in order. It returns the number of duplicate messages.
func checkTopic(t *testing.T, byPartition map[int32][]consumed, ids map[string]bool, perOrder int64) int {
	t.Helper()
	seen := map[string]int{}
	last := map[string]int64{}
	dupes := 0
	for _, msgs := range byPartition {
		for _, m := range msgs {
			seen[m.id]++
			if seen[m.id] > 1 {
				dupes++
				continue
			}
			if perOrder > 0 && m.sequence != last[m.key]+1 {
				t.Errorf("order %s: sequence %d arrived after %d", m.key, m.sequence, last[m.key])
			}
			last[m.key] = m.sequence
		}
	}
	lost := 0
	for id := range ids {
		if seen[id] == 0 {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d events never reached the topic", lost, len(ids))
	}
	if perOrder > 0 {
		for key, s := range last {
			if s != perOrder {
				t.Errorf("order %s: last sequence %d, want %d", key, s, perOrder)
			}
		}
	}
	return dupes
}

// Many orders, several events each, committed concurrently in many
// transactions while the WAL relay streams: every event reaches Kafka once,
// each order's events in sequence order, and the outbox records them all
// dispatched.
func TestWALRelayPublishesConcurrentCommitsInOrder(t *testing.T) {
	t.Parallel()
	const workers, ordersPerWorker, perOrder, perTx = 8, 60, 5, 10
	f := walSetup(t, 6)
	ctx := longContext(t, 4*time.Minute)
	reg := prometheus.NewRegistry()
	startWALRelay(t, f, newKafkaPublisher(t, testenv.Brokers()), f.config(t, "wal-0", reg))

	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for seq := int64(1); seq <= perOrder; seq++ {
				orders := rand.Perm(ordersPerWorker)
				for start := 0; start < len(orders); start += perTx {
					var batch []outbox.Event
					for _, o := range orders[start:min(start+perTx, len(orders))] {
						batch = append(batch, event(f.topic, fmt.Sprintf("order-%02d-%03d", w, o), seq))
					}
					if err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, batch...) }); err != nil {
						t.Errorf("enqueue: %v", err)
						return
					}
					mu.Lock()
					for _, e := range batch {
						ids[e.ID.String()] = true
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	total := int64(workers * ordersPerWorker * perOrder)
	testenv.Eventually(t, 3*time.Minute, "every event dispatched", func() bool { return dispatched(t, ctx, f.pool) == total })
	if dupes := checkTopic(t, consumeAll(t, testenv.Brokers(), f.topic, len(ids), len(ids), time.Minute), ids, perOrder); dupes > 0 {
		t.Errorf("%d duplicates without any failure", dupes)
	}
	if got := metricValue(t, reg, "outbox_published_total"); got != float64(total) {
		t.Errorf("published_total = %v, want %d", got, total)
	}
	if got := metricValue(t, reg, "outbox_wal_active_reader"); got != 1 {
		t.Errorf("wal_active_reader = %v, want 1", got)
	}
}

// A transaction that inserted first (the lower id) but commits last is
// published: the stream is in commit order, it has no id cursor to skip it.
func TestWALRelayPublishesALateCommit(t *testing.T) {
	t.Parallel()
	f := walSetup(t, 1)
	ctx := testenv.Context(t)
	rec := newRecorder()
	cfg := f.config(t, "wal-0", nil)
	cfg.KeepDispatched = true // the rows' ids are compared below
	startWALRelay(t, f, rec.wrap("wal", newKafkaPublisher(t, testenv.Brokers())), cfg)

	slow, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(context.Background()) //nolint:errcheck
	late := event(f.topic, "order-late", 1)
	if err := outbox.Enqueue(ctx, slow, late); err != nil {
		t.Fatal(err)
	}
	early := event(f.topic, "order-early", 1)
	enqueue(t, ctx, f.pool, early)
	testenv.Eventually(t, time.Minute, "the early commit published", func() bool { return dispatched(t, ctx, f.pool) == 1 })
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the late commit published", func() bool { return dispatched(t, ctx, f.pool) == 2 })
	lateID := queryInt(t, ctx, f.pool, "SELECT id FROM outbox WHERE event_id = $1", late.ID)
	earlyID := queryInt(t, ctx, f.pool, "SELECT id FROM outbox WHERE event_id = $1", early.ID)
	if lateID > earlyID {
		t.Fatalf("the late transaction got id %d, after the early one's %d: the test shows nothing", lateID, earlyID)
	}
	checkTopic(t, consumeAll(t, testenv.Brokers(), f.topic, 2, 2, time.Minute),
		map[string]bool{late.ID.String(): true, early.ID.String(): true}, 1)
}

// Reader A (a separate process) is killed mid-stream; standby B takes over
// when A's lease expires and resumes from the slot's confirmed position:
// every event reaches Kafka, and on every partition all of A's messages
// come before B's first (they never published at the same time).
func TestWALRelayStandbyTakesOverFromAKilledReader(t *testing.T) {
	t.Parallel()
	const n = 20000
	f := walSetup(t, 6)
	ctx := longContext(t, 4*time.Minute)
	ids := seedBacklog(t, ctx, f.pool, f.topic, "order", n, 100)

	a := startChild(t, "reader A", childRelayEnv+"=1", "RELAY_MODE=wal", "DATABASE_URL="+f.url,
		"KAFKA_BROKERS="+testenv.Brokers()[0], "RELAY_ID=reader-a", "RELAY_BATCH_SIZE=500", "RELAY_LEASE_TTL=3s",
		"RELAY_SLOT="+f.cfg.Slot, "RELAY_SOURCE=/paylab/orders/a")
	testenv.Eventually(t, 2*time.Minute, "A to publish", func() bool { return dispatched(t, ctx, f.pool) > 0 })

	regB := prometheus.NewRegistry()
	b := f.config(t, "reader-b", regB)
	startWALRelay(t, f, newKafkaPublisher(t, testenv.Brokers()), b)
	// B stands by while A holds the lease.
	testenv.Eventually(t, time.Minute, "A past a quarter of the backlog", func() bool { return dispatched(t, ctx, f.pool) >= n/4 })
	if got := metricValue(t, regB, "outbox_wal_active_reader"); got != 0 {
		t.Fatalf("standby B reports active_reader %v while A reads", got)
	}
	a.kill(t)
	atKill := dispatched(t, ctx, f.pool)
	if atKill == n {
		t.Fatal("A drained the whole backlog before it was killed: the test shows nothing")
	}

	testenv.Eventually(t, 3*time.Minute, "B to drain the rest", func() bool { return dispatched(t, ctx, f.pool) == n })
	if got := metricValue(t, regB, "outbox_wal_takeovers_total"); got != 1 {
		t.Errorf("takeovers_total = %v, want 1", got)
	}
	byPartition := consumeAll(t, testenv.Brokers(), f.topic, n, n, 2*time.Minute)
	dupes := checkTopic(t, byPartition, ids, 0)
	for p, msgs := range byPartition {
		firstB := -1
		for i, m := range msgs {
			switch {
			case m.source == "/paylab/orders" && firstB < 0:
				firstB = i
			case m.source == "/paylab/orders/a" && firstB >= 0:
				t.Errorf("partition %d: A published offset %d after B's first message at offset %d", p, m.offset, msgs[firstB].offset)
			}
		}
	}
	t.Logf("A dispatched %d before it was killed; %d duplicates after the takeover", atKill, dupes)
}

// The walsender is terminated mid-stream (what a PostgreSQL restart or a
// network cut looks like to the reader): the reader reconnects, resumes from
// the slot's confirmed position, and nothing is lost.
func TestWALRelayResumesAfterTheReplicationConnectionIsKilled(t *testing.T) {
	t.Parallel()
	const n = 20000
	f := walSetup(t, 6)
	ctx := longContext(t, 4*time.Minute)
	ids := seedBacklog(t, ctx, f.pool, f.topic, "order", n, 100)
	reg := prometheus.NewRegistry()
	startWALRelay(t, f, newKafkaPublisher(t, testenv.Brokers()), f.config(t, "wal-0", reg))

	testenv.Eventually(t, 2*time.Minute, "a quarter of the backlog", func() bool { return dispatched(t, ctx, f.pool) >= n/4 })
	killed := queryInt(t, ctx, f.admin, `SELECT count(*) FROM (SELECT pg_terminate_backend(active_pid)
		FROM pg_replication_slots WHERE slot_name = $1 AND active) AS k`, f.cfg.Slot)
	if killed != 1 {
		t.Fatalf("terminated %d walsenders, want 1", killed)
	}
	if dispatched(t, ctx, f.pool) == n {
		t.Fatal("the backlog was drained before the connection was killed: the test shows nothing")
	}
	testenv.Eventually(t, 3*time.Minute, "every event dispatched", func() bool { return dispatched(t, ctx, f.pool) == n })
	if got := metricValue(t, reg, "outbox_wal_reconnects_total"); got < 1 {
		t.Errorf("reconnects_total = %v, want ≥ 1", got)
	}
	dupes := checkTopic(t, consumeAll(t, testenv.Brokers(), f.topic, n, n, 2*time.Minute), ids, 0)
	t.Logf("%d duplicates after the reconnection", dupes)
}

// A reader stopped mid-stream and started again resumes from the slot's
// confirmed position: it re-publishes at most one batch, never the events
// confirmed before the stop, and loses none.
func TestWALRelayRestartRepublishesOnlyUnconfirmedEvents(t *testing.T) {
	t.Parallel()
	const n, batch = 20000, 500
	f := walSetup(t, 6)
	ctx := longContext(t, 4*time.Minute)
	ids := seedBacklog(t, ctx, f.pool, f.topic, "order", n, 100)
	rec := newRecorder()
	pub := newKafkaPublisher(t, testenv.Brokers())

	first := startWALRelay(t, f, rec.wrap("first", pub), f.config(t, "wal-first", nil))
	testenv.Eventually(t, 2*time.Minute, "a quarter of the backlog", func() bool { return dispatched(t, ctx, f.pool) >= n/4 })
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	if dispatched(t, ctx, f.pool) == n {
		t.Fatal("the backlog was drained before the stop: the test shows nothing")
	}
	startWALRelay(t, f, rec.wrap("second", pub), f.config(t, "wal-second", nil))
	testenv.Eventually(t, 3*time.Minute, "every event dispatched", func() bool { return dispatched(t, ctx, f.pool) == n })

	rec.mu.Lock()
	sentTwice := 0
	for id := range ids {
		if len(rec.sends[id]) == 0 {
			t.Errorf("event %s never sent", id)
		}
		if len(rec.sends[id]) > 1 {
			sentTwice++
		}
	}
	rec.mu.Unlock()
	if sentTwice > batch {
		t.Errorf("%d events sent twice after the restart, more than one batch (%d)", sentTwice, batch)
	}
	checkTopic(t, consumeAll(t, testenv.Brokers(), f.topic, n, n, 2*time.Minute), ids, 0)
	t.Logf("%d events sent twice after the restart", sentTwice)
}

// The position is confirmed only after the acknowledgements, and the table
// stays the record of what was not acknowledged. An event the broker keeps
// refusing on its own is held aside with its attempts counted (walheld.go):
// everything after it is published and confirmed while it stays pending.
// A relay started after the stop finds it pending behind its position and
// publishes it once; nothing confirmed before the stop is published again.
func TestWALRelayConfirmsOnlyAcknowledgedTransactions(t *testing.T) {
	t.Parallel()
	f := walSetup(t, 3)
	ctx := longContext(t, 3*time.Minute)
	kafka := newKafkaPublisher(t, testenv.Brokers())

	var refusingOn atomic.Bool
	refusingOn.Store(true)
	var refused atomic.Int64
	var blocked outbox.Event
	failing := refusing(kafka, &refusingOn, &blocked, &refused)
	rec := newRecorder()
	cfg := f.config(t, "wal-first", nil)
	cfg.MaxAttempts = -1
	cfg.RetryMaxBackoff = 200 * time.Millisecond
	first := startWALRelay(t, f, rec.wrap("first", failing), cfg)

	before := seedBacklog(t, ctx, f.pool, f.topic, "before", 300, 30)
	testenv.Eventually(t, time.Minute, "the events before the refused one", func() bool { return dispatched(t, ctx, f.pool) == 300 })
	blocked = event(f.topic, "order-blocked", 1)
	enqueue(t, ctx, f.pool, blocked, event(f.topic, "order-blocked-neighbour", 1))
	after := seedBacklog(t, ctx, f.pool, f.topic, "after", 300, 30)
	testenv.Eventually(t, time.Minute, "the broker to refuse the event three times", func() bool { return refused.Load() >= 3 })
	testenv.Eventually(t, time.Minute, "everything but the refused event dispatched", func() bool { return dispatched(t, ctx, f.pool) == 601 })
	if attempts := queryInt(t, ctx, f.pool, "SELECT attempts FROM outbox WHERE event_id = $1 AND dispatched_at IS NULL AND parked_at IS NULL", blocked.ID); attempts < 2 {
		t.Errorf("the refused event is pending with %d attempts counted, want its failures", attempts)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	refusingOn.Store(false)
	second := f.config(t, "wal-second", nil)
	second.StatsInterval = 200 * time.Millisecond
	startWALRelay(t, f, rec.wrap("second", kafka), second)
	testenv.Eventually(t, time.Minute, "everything dispatched", func() bool { return dispatched(t, ctx, f.pool) == 602 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if s := rec.sends[blocked.ID.String()]; len(s) != 1 || s[0] != "second" {
		t.Errorf("the refused event was acknowledged by %v, want once by the second relay", s)
	}
	for _, confirmed := range []map[string]bool{before, after} {
		for id := range confirmed {
			for _, who := range rec.sends[id] {
				if who == "second" {
					t.Errorf("event %s, confirmed before the stop, was published again", id)
				}
			}
		}
	}
}

// Events committed before the slot existed are not in its stream: the
// reader hands them over (publishes the ones still pending) before it
// streams, so a backlog left by the polling relay is not stranded.
func TestWALRelayHandsOverEventsCommittedBeforeTheSlot(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	var old map[string]bool
	f := walSetupAfter(t, 3, func(pool *pgxpool.Pool, topic string) {
		old = seedBacklog(t, ctx, pool, topic, "old", 1200, 100)
		// One of them already published by the polling relay: not handed over.
		if _, err := pool.Exec(ctx, "UPDATE outbox SET dispatched_at = now() WHERE id = (SELECT min(id) FROM outbox)"); err != nil {
			t.Fatal(err)
		}
	})
	fresh := seedBacklog(t, ctx, f.pool, f.topic, "new", 300, 100)
	rec := newRecorder()
	startWALRelay(t, f, rec.wrap("wal", newKafkaPublisher(t, testenv.Brokers())), f.config(t, "wal-0", nil))
	testenv.Eventually(t, 2*time.Minute, "every event dispatched", func() bool { return dispatched(t, ctx, f.pool) == 1500 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	sent := 0
	for id := range old {
		sent += min(len(rec.sends[id]), 1)
	}
	if sent != len(old)-1 {
		t.Errorf("%d of the %d pending events committed before the slot were published, want %d", sent, len(old), len(old)-1)
	}
	for id := range fresh {
		if len(rec.sends[id]) != 1 {
			t.Errorf("event %s committed after the slot was sent %d times, want once", id, len(rec.sends[id]))
		}
	}
}
