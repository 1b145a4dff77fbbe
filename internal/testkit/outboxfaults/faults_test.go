package outboxfaults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/migrate"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// While Kafka is down, events keep committing, the pending and
// oldest-pending-age gauges grow, nothing is marked dispatched; when Kafka
// returns the backlog drains and every event is on the topic.
func TestKafkaOutageBacklogGrowsThenDrains(t *testing.T) {
	t.Parallel()
	k := testenv.StartKafka(t)
	pool, _ := testenv.NewPool(t, "orders")
	ctx := longContext(t, 4*time.Minute)
	admin, err := sarama.NewClusterAdmin(k.Brokers(), testenv.KafkaConfig())
	if err != nil {
		t.Fatal(err)
	}
	const topic = "order-events"
	if err := broker.EnsureTopic(admin, topic, 3); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close()

	reg := prometheus.NewRegistry()
	startRelay(t, pool, newKafkaPublisher(t, k.Brokers()), outbox.RelayConfig{
		LeaseTTL: 10 * time.Second, PollInterval: 200 * time.Millisecond, StatsInterval: 200 * time.Millisecond,
		RetryBackoff: 200 * time.Millisecond, RetryMaxBackoff: 2 * time.Second, Registerer: reg, Logger: testLogger(t),
	})
	var all []outbox.Event
	commit := func(from, n int) {
		batch := make([]outbox.Event, n)
		for i := range batch {
			batch[i] = event(topic, fmt.Sprintf("order-%04d", from+i), 1)
		}
		enqueue(t, ctx, pool, batch...)
		all = append(all, batch...)
	}
	commit(0, 50)
	testenv.Eventually(t, 30*time.Second, "the first events published", func() bool { return undispatched(t, ctx, pool) == 0 })

	k.Stop(t)
	for i := range 10 { // orders keep committing
		commit(100+10*i, 10)
	}
	testenv.Eventually(t, 20*time.Second, "the backlog visible in the gauges", func() bool {
		return metricValue(t, reg, "outbox_pending") == 100 &&
			metricValue(t, reg, "outbox_oldest_pending_age_seconds") > 1
	})
	age := metricValue(t, reg, "outbox_oldest_pending_age_seconds")
	testenv.Eventually(t, 20*time.Second, "the oldest pending age growing", func() bool {
		return metricValue(t, reg, "outbox_oldest_pending_age_seconds") > age+1
	})
	testenv.Eventually(t, 30*time.Second, "publish attempts failing", func() bool {
		return metricValue(t, reg, "outbox_publish_errors_total", "kind", "transient") > 0
	})
	if n := undispatched(t, ctx, pool); n != 100 {
		t.Fatalf("%d undispatched during the outage, want 100: something was marked without an ack", n)
	}
	if n := queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL"); n != 0 {
		t.Fatalf("%d events parked during a transient outage", n)
	}

	k.Start(t)
	testenv.Eventually(t, 2*time.Minute, "the backlog drained", func() bool { return undispatched(t, ctx, pool) == 0 })
	testenv.Eventually(t, 10*time.Second, "the gauges back to zero", func() bool {
		return metricValue(t, reg, "outbox_pending") == 0 &&
			metricValue(t, reg, "outbox_oldest_pending_age_seconds") == 0
	})
	onTopic := consumeAll(t, k.Brokers(), topic, len(all), len(all), time.Minute)
	seen := map[string]bool{}
	for _, msgs := range onTopic {
		for _, m := range msgs {
			seen[m.id] = true
		}
	}
	for _, e := range all {
		if !seen[e.ID.String()] {
			t.Fatalf("event %s lost: %d of %d on the topic", e.ID, len(seen), len(all))
		}
	}
	t.Logf("all %d events on the topic after the outage (%v publish errors during it)",
		len(all), metricValue(t, reg, "outbox_publish_errors_total", "kind", "transient"))
}

// A commit is decoded (and streamed) as soon as its WAL record is flushed,
// and becomes visible to other sessions a moment later: after the
// committing backend leaves the process array, or after every synchronous
// standby confirmed it. An event published in that window is a real commit
// (it survives a crash), but its row is not yet there for the relay's
// DELETE. The relay must delete (or mark) it once it is visible, and must not
// confirm its position before: otherwise the row stays pending for good,
// and the publish-lag alarm fires on a healthy system.
//
// The window is held open here with synchronous replication to a standby
// that does not exist, on a server of the test's own: the commit is flushed
// and streamed, and waits invisible until the test cancels the wait.
func TestWALRelayRecordsAnEventWhoseCommitBecomesVisibleAfterItWasPublished(t *testing.T) {
	t.Parallel()
	f := walSetupPrivate(t, 1)
	ctx := testenv.Context(t)
	// Every session commits locally, except the one that opts in below.
	for _, sql := range []string{
		"ALTER SYSTEM SET synchronous_standby_names = 'absent_standby'",
		"ALTER SYSTEM SET synchronous_commit = 'local'",
		"SELECT pg_reload_conf()",
	} {
		if _, err := f.admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	testenv.Eventually(t, 30*time.Second, "the server's new settings", func() bool {
		var names string
		err := conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&names)
		return err == nil && names == "absent_standby"
	})
	var pid int32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	cfg := f.config(t, "wal-0", reg)
	// The standby guard would hold the event until the absent standby has
	// it (TestWALRelayStandbyGuard proves that); here the event must go out
	// while its commit is invisible, as it does without synchronous
	// replication between the flush and the commit's visibility.
	cfg.StandbyGuard = outbox.StandbyGuardOff
	startWALRelay(t, f, newKafkaPublisher(t, testenv.Brokers()), cfg)

	e := event(f.topic, "order-invisible", 1)
	committed := make(chan error, 1)
	go func() {
		tx, err := conn.Begin(ctx)
		if err == nil {
			if err = outbox.Enqueue(ctx, tx, e); err == nil {
				err = tx.Commit(ctx)
			}
		}
		committed <- err
	}()
	// Published while its commit waits for the standby…
	consumeAll(t, testenv.Brokers(), f.topic, 1, 1, time.Minute)
	// …and recorded by the relay (before the fix: a DELETE that found
	// nothing, and a confirmed position) or held back until visible.
	testenv.Eventually(t, time.Minute, "the relay to record the batch or wait for its commit", func() bool {
		return metricValue(t, reg, "outbox_publish_latency_seconds") > 0 ||
			metricValue(t, reg, "outbox_wal_invisible_commit_waits_total") > 0
	})
	select {
	case err := <-committed:
		t.Fatalf("the commit did not wait for the standby (err %v): the window is not open", err)
	default:
	}
	// End the wait: the transaction, committed locally, becomes visible.
	if _, err := f.admin.Exec(ctx, "SELECT pg_cancel_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatalf("commit: %v", err)
	}
	testenv.Eventually(t, time.Minute, "the published event's row deleted", func() bool { return dispatched(t, ctx, f.pool) == 1 })
	if n := queryInt(t, ctx, f.pool, "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"); n != 0 {
		t.Errorf("%d rows pending", n)
	}
}

// walSetupPrivate is walSetup on a PostgreSQL server of the test's own, for
// a test that changes server settings.
func walSetupPrivate(t *testing.T, partitions int32) *walFixture {
	t.Helper()
	ctx := testenv.Context(t)
	pg := testenv.StartPostgres(t)
	db := migrate.Database{Name: "orders", Role: "orders", Password: "orders", Replication: true}
	if err := migrate.Bootstrap(ctx, pg.AdminURL(), []migrate.Database{db}); err != nil {
		t.Fatal(err)
	}
	url, err := migrate.URL(pg.AdminURL(), db.Name, db.Role, db.Password)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, url, "orders"); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return walFixtureOn(t, pg.AdminURL(), pool, url, partitions, nil)
}
