package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// bgRelay is a relay's Run in a goroutine of its own.
type bgRelay struct {
	cancel context.CancelFunc
	done   chan error
	ended  bool // Run's result was read
	err    error
}

// goRun runs run until stop, wait or the end of the test, which fails if
// Run returned an error that neither stop nor wait read.
func goRun(t *testing.T, name string, run func(context.Context) error) *bgRelay {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &bgRelay{cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- run(ctx) }()
	t.Cleanup(func() {
		if !b.ended {
			if err := b.stop(); err != nil {
				t.Errorf("relay %s: %v", name, err)
			}
		}
	})
	return b
}

// stop ends Run and returns its error.
func (b *bgRelay) stop() error {
	if !b.ended {
		b.cancel()
		b.err, b.ended = <-b.done, true
	}
	return b.err
}

// wait returns Run's error once Run returns by itself, failing the test
// if it still runs after d.
func (b *bgRelay) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	if b.ended {
		return b.err
	}
	select {
	case b.err = <-b.done:
		b.ended = true
		b.cancel()
		return b.err
	case <-time.After(d):
		t.Fatalf("the relay still runs after %v", d)
		return nil
	}
}

func mustRelay(t *testing.T, pool *pgxpool.Pool, pub outbox.Publisher, cfg outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	r, err := outbox.NewRelay(pool, pub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustWALRelay(t *testing.T, f *walFixture, pub outbox.Publisher, cfg outbox.WALConfig) *outbox.WALRelay {
	t.Helper()
	r, err := outbox.NewWALRelay(f.pool, f.url, pub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// idHolder is the backend whose session holds relay id's lock on the
// outbox table (the key doc.go documents), 0 when none does.
func idHolder(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id string) int64 {
	t.Helper()
	return queryInt(t, ctx, pool, `SELECT COALESCE(max(pid), 0) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = hashtext('outbox_relay_id:outbox')::oid AND objid = hashtext($1)::oid`, id)
}

func slotPresent(t *testing.T, ctx context.Context, pool *pgxpool.Pool, slot string) bool {
	t.Helper()
	return queryInt(t, ctx, pool, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot) == 1
}

// A relay started with the ID of a running relay on the same table is
// refused at once, in either mode, and the running relay goes on; once it
// has stopped, the ID is free again.
func TestExclusiveRelayIDIsRefusedWhileInUse(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"poll", "wal"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t)
			var (
				pool     *pgxpool.Pool
				topic    = "exclusive"
				newRelay func(id string) func(context.Context) error
			)
			if mode == "poll" {
				pool, _ = testenv.NewPool(t, migrate)
				newRelay = func(id string) func(context.Context) error {
					return mustRelay(t, pool, acceptAll, outbox.RelayConfig{ID: id, LeaseTTL: 2 * time.Second,
						PollInterval: 50 * time.Millisecond, Logger: testLogger(t)}).Run
				}
			} else {
				f := walSetup(t, 1)
				pool, topic = f.pool, f.topic
				newRelay = func(id string) func(context.Context) error {
					return mustWALRelay(t, f, acceptAll, f.config(t, id, nil)).Run
				}
			}
			published := func(order string) {
				t.Helper()
				enqueue(t, ctx, pool, event(topic, order, 1))
				testenv.Eventually(t, time.Minute, order+" published", func() bool { return undispatched(t, ctx, pool) == 0 })
			}

			first := goRun(t, "first", newRelay("same"))
			published("order-1")
			second := goRun(t, "second", newRelay("same"))
			if err := second.wait(t, 30*time.Second); !errors.Is(err, outbox.ErrRelayIDInUse) {
				t.Fatalf("the second relay with the ID returned %v, want ErrRelayIDInUse", err)
			}
			published("order-2") // by the first relay: the only one running
			if err := first.stop(); err != nil {
				t.Fatal(err)
			}
			third := goRun(t, "third", newRelay("same"))
			published("order-3")
			if err := third.stop(); err != nil {
				t.Fatalf("the relay started once the ID was free: %v", err)
			}
		})
	}
}

// The server ends the guard's session (as a restart ends every session):
// the relay takes its ID again and goes on publishing. When another
// session takes the ID first, the relay returns ErrRelayIDInUse: it does
// not publish without its guard.
func TestExclusiveRelayTakesItsIDAgainAfterItsConnectionDrops(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, dbURL := testenv.NewPool(t, migrate)
	relay := goRun(t, "a", mustRelay(t, pool, acceptAll, outbox.RelayConfig{ID: "a", LeaseTTL: 2 * time.Second,
		PollInterval: 50 * time.Millisecond, Logger: testLogger(t)}).Run)
	enqueue(t, ctx, pool, event("exclusive", "order-1", 1))
	testenv.Eventually(t, time.Minute, "the first event published", func() bool { return undispatched(t, ctx, pool) == 0 })

	first := idHolder(t, ctx, pool, "a")
	if first == 0 {
		t.Fatal("no session holds the running relay's ID")
	}
	if n := queryInt(t, ctx, pool, "SELECT count(*) FROM (SELECT pg_terminate_backend($1)) AS t", first); n != 1 {
		t.Fatal("terminating the guard's session failed")
	}
	var second int64
	testenv.Eventually(t, time.Minute, "the ID taken again by a new session", func() bool {
		second = idHolder(t, ctx, pool, "a")
		return second != 0 && second != first
	})
	enqueue(t, ctx, pool, event("exclusive", "order-2", 1))
	testenv.Eventually(t, time.Minute, "an event published after the drop", func() bool { return undispatched(t, ctx, pool) == 0 })

	other, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	// Queue for the guard's lock, then end the guard's session: the lock goes
	// to the waiting session as the guard's ends, before the relay is back
	// (a try-lock does not jump a queue).
	otherPID := other.PgConn().PID()
	locked := make(chan error, 1)
	go func() {
		_, err := other.Exec(ctx, `SELECT pg_advisory_lock(hashtext('outbox_relay_id:outbox'), hashtext('a'))`)
		locked <- err
	}()
	testenv.Eventually(t, time.Minute, "the other session to wait for the ID", func() bool {
		return queryInt(t, ctx, pool, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = $1`, otherPID) == 1
	})
	if n := queryInt(t, ctx, pool, "SELECT count(*) FROM (SELECT pg_terminate_backend($1)) AS t", second); n != 1 {
		t.Fatal("terminating the guard's session failed")
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if err := relay.wait(t, time.Minute); !errors.Is(err, outbox.ErrRelayIDInUse) {
		t.Fatalf("with its ID taken meanwhile, the relay returned %v, want ErrRelayIDInUse", err)
	}
}

// Polling relays that start together take turns at the mode check, and a
// check's transaction releases the WAL mode's lock a moment after the start
// lock: a polling relay that finds the WAL mode's lock held by such a
// transaction, which lets it go at once, starts all the same (only a WAL
// relay, which holds it for good, refuses it).
func TestExclusivePollRelayStartsPastAnotherRelaysModeCheck(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, migrate)
	ctx := testenv.Context(t)
	check, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = check.Rollback(context.Background()) }()
	if _, err := check.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('outbox_mode:outbox'), hashtext('wal'))"); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	counting := outbox.PublisherFunc(func(_ context.Context, events []outbox.Event) []error {
		sent.Add(int64(len(events)))
		return nil
	})
	relay := goRun(t, "poll", mustRelay(t, pool, counting, outbox.RelayConfig{ID: "starting", PollInterval: 100 * time.Millisecond, Logger: testLogger(t)}).Run)
	// The relay takes its ID, then checks the modes, each check a
	// transaction on its guard's session: let the lock go once the relay
	// has found it taken.
	looked := func() bool {
		pid := idHolder(t, ctx, pool, "starting")
		return pid != 0 && queryInt(t, ctx, pool, `SELECT count(*) FROM pg_stat_activity
			WHERE pid = $1 AND state = 'idle' AND query ILIKE 'commit%'`, pid) == 1
	}
	deadline := time.Now().Add(30 * time.Second)
	for !looked() {
		select {
		case err := <-relay.done:
			relay.err, relay.ended = err, true
			t.Fatalf("the relay returned %v while another relay's check held the lock", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the relay did not check the modes within 30s")
		}
	}
	if err := check.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	enqueue(t, ctx, pool, event("orders", "order-1", 1))
	testenv.Eventually(t, 30*time.Second, "the relay to publish", func() bool { return sent.Load() == 1 })
	if err := relay.stop(); err != nil {
		t.Fatalf("the relay returned %v", err)
	}
}

// A polling relay started while a WAL relay runs against the table is
// refused and publishes nothing, and leaves the slot alone; a polling
// relay of another database runs (the modes are per table and database)
// and leaves the slot, which is not its database's, alone too. Once the
// WAL relay has stopped, the polling relay starts, drops the slot and its
// publication, and publishes.
func TestExclusivePollRelayRefusedWhileAWALRelayRuns(t *testing.T) {
	t.Parallel()
	f := walSetup(t, 1)
	ctx := testenv.Context(t)
	wal := goRun(t, "wal", mustWALRelay(t, f, acceptAll, f.config(t, "wal", nil)).Run)
	enqueue(t, ctx, f.pool, event(f.topic, "order-1", 1))
	testenv.Eventually(t, time.Minute, "the WAL relay to publish", func() bool { return dispatched(t, ctx, f.pool) == 1 })

	var sent atomic.Int64
	counting := outbox.PublisherFunc(func(_ context.Context, events []outbox.Event) []error {
		sent.Add(int64(len(events)))
		return nil
	})
	refused := goRun(t, "poll", mustRelay(t, f.pool, counting, f.pollConfig(t, "poll")).Run)
	if err := refused.wait(t, 30*time.Second); !errors.Is(err, outbox.ErrWALRelayRunning) {
		t.Fatalf("the polling relay returned %v, want ErrWALRelayRunning", err)
	}
	if sent.Load() != 0 {
		t.Errorf("the refused polling relay published %d events", sent.Load())
	}
	if !slotPresent(t, ctx, f.admin, f.cfg.Slot) {
		t.Fatal("the slot was dropped while its WAL relay ran")
	}

	elsewhere, _ := testenv.NewPool(t, migrate)
	cfg := f.pollConfig(t, "poll")
	goRun(t, "poll elsewhere", mustRelay(t, elsewhere, counting, cfg).Run)
	enqueue(t, ctx, elsewhere, event(f.topic, "order-elsewhere", 1))
	testenv.Eventually(t, time.Minute, "the other database's polling relay to publish", func() bool { return undispatched(t, ctx, elsewhere) == 0 })
	if !slotPresent(t, ctx, f.admin, f.cfg.Slot) {
		t.Fatal("a polling relay dropped another database's slot")
	}

	if err := wal.stop(); err != nil {
		t.Fatal(err)
	}
	goRun(t, "poll", mustRelay(t, f.pool, counting, f.pollConfig(t, "poll")).Run)
	testenv.Eventually(t, time.Minute, "the slot dropped", func() bool { return !slotPresent(t, ctx, f.admin, f.cfg.Slot) })
	enqueue(t, ctx, f.pool, event(f.topic, "order-2", 1))
	testenv.Eventually(t, time.Minute, "the polling relay to publish", func() bool { return undispatched(t, ctx, f.pool) == 0 })
}

// enqueuer commits, every 10 ms until stopped, one transaction holding the
// next event of each of its orders.
type enqueuer struct {
	stopCh chan struct{}
	done   chan struct{}
	once   sync.Once
	rounds int
	ids    map[string]bool
	err    error
}

func startEnqueuer(t *testing.T, ctx context.Context, pool *pgxpool.Pool, topic string, orders int) *enqueuer {
	e := &enqueuer{stopCh: make(chan struct{}), done: make(chan struct{}), ids: map[string]bool{}}
	go func() {
		defer close(e.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-e.stopCh:
				return
			case <-tick.C:
			}
			batch := make([]outbox.Event, orders)
			for o := range orders {
				batch[o] = event(topic, fmt.Sprintf("order-%03d", o), int64(e.rounds+1))
			}
			rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
			if e.err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, batch...) }); e.err != nil {
				return
			}
			e.rounds++
			for _, ev := range batch {
				e.ids[ev.ID.String()] = true
			}
		}
	}()
	t.Cleanup(e.stop)
	return e
}

func (e *enqueuer) stop() {
	e.once.Do(func() { close(e.stopCh) })
	<-e.done
}

// A WAL relay started while a polling relay runs waits, not ready: it
// publishes nothing and sets up no slot. Once the polling relay has
// stopped it sets up the slot, hands over what was left pending and
// streams. Events committed all along reach the topic, each order's in
// sequence order, and no event is published by both relays; the WAL
// relay sends an event twice only if it committed while the slot was
// being created (both handed over and streamed).
func TestExclusiveWALRelayWaitsForThePollingRelayThenTakesOver(t *testing.T) {
	t.Parallel()
	const orders = 20
	f := walSetup(t, 3)
	ctx := longContext(t, 4*time.Minute)
	kafka := newKafkaPublisher(t, testenv.Brokers())
	rec := newRecorder()
	sent := func(name string) int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		n := 0
		for _, senders := range rec.sends {
			for _, s := range senders {
				if s == name {
					n++
				}
			}
		}
		return n
	}

	poll := goRun(t, "poll", mustRelay(t, f.pool, rec.wrap("poll", kafka), f.pollConfig(t, "poll")).Run)
	testenv.Eventually(t, time.Minute, "the polling relay to retire the slot created before it", func() bool {
		return !slotPresent(t, ctx, f.admin, f.cfg.Slot)
	})
	writer := startEnqueuer(t, ctx, f.pool, f.topic, orders)
	testenv.Eventually(t, time.Minute, "the polling relay to publish", func() bool { return sent("poll") >= 5*orders })

	cfg := f.config(t, "wal", nil)
	cfg.KeepDispatched = true // the rows' ids are compared below
	walR := mustWALRelay(t, f, rec.wrap("wal", kafka), cfg)
	goRun(t, "wal", walR.Run)
	testenv.Eventually(t, time.Minute, "the WAL relay to report that it waits", func() bool {
		err := walR.Ready(ctx)
		return err != nil && strings.Contains(err.Error(), "polling relays run against table outbox")
	})
	base := sent("poll")
	testenv.Eventually(t, time.Minute, "the polling relay to go on", func() bool { return sent("poll") >= base+5*orders })
	if n := sent("wal"); n != 0 {
		t.Fatalf("the WAL relay published %d events while the polling relay ran", n)
	}
	if slotPresent(t, ctx, f.admin, f.cfg.Slot) {
		t.Fatal("the WAL relay created its slot while the polling relay ran")
	}
	if err := walR.Ready(ctx); err == nil {
		t.Fatal("the waiting WAL relay reports itself ready")
	}

	if err := poll.stop(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the WAL relay to take over", func() bool {
		return walR.Ready(ctx) == nil && sent("wal") >= 5*orders
	})
	writer.stop()
	if writer.err != nil {
		t.Fatal(writer.err)
	}
	total := writer.rounds * orders
	testenv.Eventually(t, 2*time.Minute, "every event dispatched", func() bool { return undispatched(t, ctx, f.pool) == 0 })
	if n := queryInt(t, ctx, f.pool, "SELECT count(*) FROM outbox"); n != int64(total) {
		t.Fatalf("%d rows in the outbox, want %d", n, total)
	}
	dupes := checkTopic(t, consumeAll(t, testenv.Brokers(), f.topic, total, total, 2*time.Minute), writer.ids, int64(writer.rounds))

	handoverMax := queryInt(t, ctx, f.pool, "SELECT handover_max_id FROM outbox_wal_readers WHERE slot = $1", f.cfg.Slot)
	rowID := map[string]int64{}
	rows, err := f.pool.Query(ctx, "SELECT event_id::text, id FROM outbox")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var eventID string
		var id int64
		if err := rows.Scan(&eventID, &id); err != nil {
			t.Fatal(err)
		}
		rowID[eventID] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	window := 0
	for id, senders := range rec.sends {
		if slices.Contains(senders, "poll") && slices.Contains(senders, "wal") {
			t.Errorf("event %s (row %d) was published by both relays: %v", id, rowID[id], senders)
		}
		if n := len(slices.DeleteFunc(slices.Clone(senders), func(s string) bool { return s != "wal" })); n > 1 {
			if rowID[id] > handoverMax {
				t.Errorf("event %s (row %d, after the hand-over's %d) was sent %d times by the WAL relay", id, rowID[id], handoverMax, n)
			}
			window++
		}
	}
	t.Logf("%d events in %d rounds, %d duplicates on the topic, %d events committed while the slot was created", total, writer.rounds, dupes, window)
}
