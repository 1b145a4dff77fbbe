package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// With NotifyAfterCommit, the writer's transaction sends no NOTIFY; the
// Notifier sends one per round of Notify calls, however many commits asked
// for it meanwhile.
func TestNotifyAfterCommitLeavesTheNotificationToTheNotifier(t *testing.T) {
	t.Parallel()
	pool, dbURL := testenv.NewPool(t, migrate)
	ctx := testenv.Context(t)
	listener, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close(context.Background()) })
	if _, err := listener.Exec(ctx, "LISTEN "+"outbox"); err != nil {
		t.Fatal(err)
	}
	received := func(wait time.Duration) bool {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		_, err := listener.WaitForNotification(wctx)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && wctx.Err() == nil {
			t.Fatalf("waiting for a notification: %v", err)
		}
		return err == nil
	}

	cfg := outbox.Config{NotifyAfterCommit: true}
	w, err := outbox.NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return w.Enqueue(ctx, tx, event("orders", "order-1", 1))
	}); err != nil {
		t.Fatal(err)
	}
	if received(500 * time.Millisecond) {
		t.Fatal("the writer's transaction sent a NOTIFY, want none with NotifyAfterCommit")
	}
	if n := undispatched(t, ctx, pool); n != 1 {
		t.Fatalf("%d undispatched events, want the one enqueued", n)
	}

	n, err := outbox.NewNotifier(pool.Config().ConnConfig, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	// A thousand commits before the notifier runs fold into one NOTIFY.
	for range 1000 {
		n.Notify()
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("notifier: %v", err)
		}
	})
	if !received(time.Minute) {
		t.Fatal("no NOTIFY from the notifier")
	}
	testenv.Eventually(t, time.Minute, "the notifier counted its NOTIFY", func() bool { return n.Sent() >= 1 })
	n.Notify()
	if !received(time.Minute) {
		t.Fatal("no NOTIFY for the second round")
	}
	testenv.Eventually(t, time.Minute, "the notifier counted its second NOTIFY", func() bool { return n.Sent() >= 2 })
	if got := n.Sent(); got != 2 {
		t.Errorf("the notifier sent %d NOTIFYs for two rounds of Notify, want 2", got)
	}

	// Its connection killed, the notifier reconnects for the next round.
	var killed int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'outbox-notifier'`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d notifier connections (%v), want 1", killed, err)
	}
	n.Notify()
	if !received(time.Minute) {
		t.Fatal("no NOTIFY after the notifier's connection was killed")
	}
}

// A relay that polls once an hour publishes an event written with
// NotifyAfterCommit as soon as the Notifier is told of the commit.
func TestNotifierWakesTheRelay(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)
	cfg := outbox.Config{NotifyAfterCommit: true}
	startRelay(t, pool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{PollInterval: time.Hour, Logger: testLogger(t)})
	n := runNotifier(t, ctx, pool, cfg)
	w, err := outbox.NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The relay's first round (after its LISTEN) may come before or after
	// the commit; commit, notify, and repeat once published, so the second
	// event can only have been found through the notifier.
	for i := int64(1); i <= 2; i++ {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return w.Enqueue(ctx, tx, event(topic, "order-1", i))
		}); err != nil {
			t.Fatal(err)
		}
		n.Notify()
		testenv.Eventually(t, time.Minute, "the event published on the notifier's NOTIFY", func() bool {
			return undispatched(t, ctx, pool) == 0
		})
	}
}

// However fast Notify is called, the Notifier sends no more than one NOTIFY
// per NotifyInterval; the first after a quiet spell at once.
func TestNotifierPacesItsNotifications(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, migrate)
	ctx := testenv.Context(t)
	const interval = 50 * time.Millisecond
	n := runNotifier(t, ctx, pool, outbox.Config{NotifyAfterCommit: true, NotifyInterval: interval})
	n.Notify()
	testenv.Eventually(t, 10*time.Second, "the first NOTIFY sent", func() bool { return n.Sent() == 1 })
	start := time.Now()
	for time.Since(start) < 500*time.Millisecond {
		n.Notify()
		time.Sleep(time.Millisecond)
	}
	sent, most := n.Sent()-1, int64(time.Since(start)/interval)+2
	if sent > most {
		t.Fatalf("%d NOTIFYs in %v, at most %d with an interval of %v", sent, time.Since(start).Round(time.Millisecond), most, interval)
	}
	testenv.Eventually(t, 10*time.Second, "a NOTIFY for the Notify calls after the first", func() bool { return n.Sent() > 1 })
}

// runNotifier runs a Notifier for cfg on pool's database until the test
// ends.
func runNotifier(t *testing.T, ctx context.Context, pool *pgxpool.Pool, cfg outbox.Config) *outbox.Notifier {
	t.Helper()
	n, err := outbox.NewNotifier(pool.Config().ConnConfig, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return n
}
