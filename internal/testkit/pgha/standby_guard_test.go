package pgha_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/lab/pgha"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// guardHeldChecks is how many readings of the standbys' positions the
// guarded relay makes, with the events streamed and the standby frozen,
// before the test concludes that nothing was published: work counted, not
// time (with its backoff, a few seconds on an idle machine).
const guardHeldChecks = 40

// TestWALRelayStandbyGuard: with synchronous replication and the
// synchronous standby frozen (its walreceiver stopped), a transaction
// committed on the leader is decoded by the WAL relay's walsender as soon as
// it is flushed there, although the standby Patroni would promote does not
// have it. With the standby guard, none of its events reaches Kafka until
// the standby has caught up; without it, they are published while the
// standby lacks them — phantoms if the leader died then.
//
// Two kinds of transaction are committed after the freeze: one with
// synchronous_commit = local, which returns at once (the standby is behind,
// the client was told "committed"), and one with synchronous_commit = on,
// whose COMMIT waits for the standby: the relay streams it all the same.
func TestWALRelayStandbyGuard(t *testing.T) {
	c := setup(t, pgha.Synchronous)
	ctx := longContext(t, 8*time.Minute)

	leader := c.Leader(ctx)
	if leader == 0 {
		t.Fatal("no leader after start")
	}
	admin, err := pgxpool.New(ctx, c.MemberURL(leader, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	// The leader would end the frozen standby's connection after
	// wal_sender_timeout (60 s), and Patroni name the other replica
	// synchronous: the freeze would thaw itself on a slow machine.
	if _, err := admin.Exec(ctx, "ALTER SYSTEM SET wal_sender_timeout = '10min'"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		guard outbox.StandbyGuard
		held  bool
	}{
		// Off first: the same check fails without the guard.
		{outbox.StandbyGuardOff, false},
		{outbox.StandbyGuardAuto, true},
		{outbox.StandbyGuardOn, true},
	} {
		t.Run(string(tc.guard), func(t *testing.T) {
			var standby int
			testenv.Eventually(t, 2*time.Minute, "a synchronous standby", func() bool {
				standby = synchronized(ctx, c, admin)
				return standby != 0
			})
			checkStandbyGuard(t, ctx, c, admin, leader, standby, tc.guard, tc.held)
		})
	}

	// What the guard costs with a healthy synchronous standby: the same
	// stream of synchronous commits relayed with the guard off and on,
	// alternated; logged, not asserted (the machine's load decides).
	t.Run("cost", func(t *testing.T) {
		for round := range 2 {
			order := []outbox.StandbyGuard{outbox.StandbyGuardOff, outbox.StandbyGuardOn}
			if round == 1 {
				order[0], order[1] = order[1], order[0]
			}
			for _, guard := range order {
				t.Run(fmt.Sprintf("%s-%d", guard, round+1), func(t *testing.T) {
					measureStandbyGuard(t, ctx, c, admin, leader, fmt.Sprintf("cost_%s_%d", guard, round+1), guard)
				})
			}
		}
	})
}

// measureStandbyGuard commits costTxs transactions of costEvents events,
// one after the other with synchronous_commit = on, while a relay with guard
// streams them, and logs the publish latency (insert to recorded, the
// relay's histogram) and the guard's readings and waits.
func measureStandbyGuard(t *testing.T, ctx context.Context, c *pgha.Cluster, admin *pgxpool.Pool, leader int, database string, guard outbox.StandbyGuard) {
	const costTxs, costEvents = 200, 10
	f := startGuardedRelay(t, ctx, c, admin, leader, database, guard)
	start := time.Now()
	for i := range costTxs {
		events := make([]outbox.Event, costEvents)
		for j := range events {
			events[j] = guardEvent(f.topic, fmt.Sprintf("cost-%d-%d", i, j))
		}
		commit(t, ctx, f.writer, "on", events...)
	}
	testenv.Eventually(t, 2*time.Minute, "every event on the topic", func() bool {
		return f.records() == costTxs*costEvents
	})
	elapsed := time.Since(start)
	mean := func(name string) time.Duration {
		n := metric(t, f.reg, name)
		if n == 0 {
			return 0
		}
		return time.Duration(histogramSum(t, f.reg, name) / n * float64(time.Second))
	}
	testenv.Eventually(t, time.Minute, "every event recorded", func() bool {
		return metric(t, f.reg, "t_published_total") == costTxs*costEvents
	})
	t.Logf("guard %s: %d synchronous commits of %d events relayed in %s; publish latency mean %s over %v batches; guard readings %v, wait per batch mean %s",
		guard, costTxs, costEvents, elapsed.Round(time.Millisecond), mean("t_publish_latency_seconds").Round(10*time.Microsecond),
		metric(t, f.reg, "t_batch_size"), metric(t, f.reg, "t_wal_standby_checks_total"),
		mean("t_wal_standby_wait_seconds").Round(10*time.Microsecond))
}

// guardFixture is a WAL relay running with a standby guard on a database
// of its own on the leader, publishing to a topic of its own.
type guardFixture struct {
	writer  *pgxpool.Pool // the application's connections: synchronous_commit as the server's
	topic   string
	reg     *prometheus.Registry // the relay's metrics, prefixed t_
	records func() int64         // the records on the topic
}

// startGuardedRelay creates database on the leader, its outbox and slot, and
// runs a WAL relay with guard on it until the test ends.
func startGuardedRelay(t *testing.T, ctx context.Context, c *pgha.Cluster, admin *pgxpool.Pool, leader int, database string, guard outbox.StandbyGuard) *guardFixture {
	t.Helper()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+database); err != nil {
		t.Fatal(err)
	}
	url := c.MemberURL(leader, database)
	writer, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(writer.Close)
	if err := outbox.Migrate(ctx, writer, outbox.Config{}); err != nil {
		t.Fatal(err)
	}
	// The relay's own writes (its lease, the deletes of what it published)
	// commit locally: with the standby frozen, a synchronous commit would
	// wait, and the relay lose its lease. What is checked is what it
	// publishes.
	relayCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	relayCfg.ConnConfig.RuntimeParams["synchronous_commit"] = "local"
	pool, err := pgxpool.NewWithConfig(ctx, relayCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	f := &guardFixture{writer: writer, topic: testenv.NewTopic(t, 1), reg: prometheus.NewRegistry()}
	cfg := outbox.WALConfig{ID: "guard-" + string(guard), Slot: database, StandbyGuard: guard,
		Registerer: f.reg, MetricPrefix: "t", Logger: testLogger(t),
		LeaseTTL: 30 * time.Second, PollInterval: 100 * time.Millisecond, RetryBackoff: 50 * time.Millisecond}
	if err := outbox.SetupWAL(ctx, pool, cfg); err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewWALRelay(pool, url, newPublisher(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the WAL relay: %v", err)
		}
	})
	f.records = topicRecords(t, f.topic)
	return f
}

func checkStandbyGuard(t *testing.T, ctx context.Context, c *pgha.Cluster, admin *pgxpool.Pool, leader, standby int, guard outbox.StandbyGuard, held bool) {
	f := startGuardedRelay(t, ctx, c, admin, leader, "guard_"+string(guard), guard)
	writer, topic, reg, records := f.writer, f.topic, f.reg, f.records

	// Before the freeze: a commit reaches Kafka, with the guard too.
	commit(t, ctx, writer, "on", guardEvent(topic, "before"))
	testenv.Eventually(t, 2*time.Minute, "the event committed before the freeze on the topic", func() bool {
		return records() == 1
	})

	frozen, err := c.FreezeReplica(ctx, standby)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = frozen.Thaw() })
	t.Logf("member %d, the synchronous standby, frozen at %s", standby, frozen.FlushLSN)

	// Committed on the leader alone.
	commit(t, ctx, writer, "local", guardEvent(topic, "local-1"), guardEvent(topic, "local-2"))
	var committedAt string
	if err := writer.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&committedAt); err != nil {
		t.Fatal(err)
	}
	// Committing, the COMMIT waiting for the frozen standby.
	waiting := make(chan error, 1)
	go func() {
		waiting <- pgx.BeginFunc(context.WithoutCancel(ctx), writer, func(tx pgx.Tx) error {
			return outbox.Enqueue(ctx, tx, guardEvent(topic, "waiting-1"))
		})
	}()
	const all = 1 + 2 + 1

	checks := func() float64 { return metric(t, reg, "t_wal_standby_checks_total") }
	if held {
		// The relay has streamed the transactions and holds them: its
		// guard reads the standbys again and again, finding the standby
		// behind.
		base := checks()
		testenv.Eventually(t, 3*time.Minute, fmt.Sprintf("%d readings of the standbys' positions", guardHeldChecks), func() bool {
			return checks() >= base+guardHeldChecks
		})
		if behind := metric(t, reg, "t_wal_standby_behind_bytes"); behind <= 0 {
			t.Errorf("t_wal_standby_behind_bytes = %v while the relay holds the events, want > 0", behind)
		}
		if n := records(); n != 1 {
			t.Fatalf("%d records on the topic with the synchronous standby frozen, want 1 (the event committed before): the guard let a transaction the standby lacks through", n)
		}
	} else {
		testenv.Eventually(t, 2*time.Minute, "the events committed after the freeze on the topic", func() bool {
			return records() == all
		})
		if checks() != 0 {
			t.Errorf("the guard is off and read the standbys' positions %v times", checks())
		}
	}
	// Either way the standby still lacks them: published now, they would
	// be phantoms if the leader died.
	if !standbyBehind(t, ctx, admin, standby, committedAt) {
		t.Fatalf("member %d flushed past %s while frozen: the freeze did not hold", standby, committedAt)
	}
	select {
	case err := <-waiting:
		t.Fatalf("the synchronous commit returned (%v) while the standby was frozen", err)
	default:
	}
	if held {
		t.Logf("guard %s: 0 of the %d events committed after the freeze published while the standby was behind", guard, all-1)
	} else {
		t.Logf("guard off: all %d events committed after the freeze published while the standby lacked them (phantoms had the leader died)", all-1)
	}

	if err := frozen.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("the synchronous commit after the thaw: %v", err)
	}
	testenv.Eventually(t, 2*time.Minute, "every event on the topic after the thaw", func() bool {
		return records() == all
	})
	if !held {
		return
	}
	if metric(t, reg, "t_wal_standby_wait_seconds") == 0 {
		t.Error("t_wal_standby_wait_seconds recorded nothing")
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// longContext is a context for tests that outlast testenv.Context's minute.
func longContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func guardEvent(topic, order string) outbox.Event {
	return outbox.Event{ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: order,
		Type: "OrderCaptured", Sequence: 1, Topic: topic,
		Payload: json.RawMessage(fmt.Sprintf(`{"order_id":%q,"schema_version":1}`, order))}
}

// commit enqueues events in one transaction committed with
// synchronous_commit set to mode.
func commit(t *testing.T, ctx context.Context, pool *pgxpool.Pool, mode string, events ...outbox.Event) {
	t.Helper()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('synchronous_commit', $1, true)", mode); err != nil {
			return err
		}
		return outbox.Enqueue(ctx, tx, events...)
	})
	if err != nil {
		t.Fatalf("committing with synchronous_commit = %s: %v", mode, err)
	}
}

// standbyBehind reports whether member m has not flushed lsn, per the
// leader's pg_stat_replication.
func standbyBehind(t *testing.T, ctx context.Context, admin *pgxpool.Pool, m int, lsn string) bool {
	t.Helper()
	var behind bool
	err := admin.QueryRow(ctx, "SELECT flush_lsn < $2::pg_lsn FROM pg_stat_replication WHERE application_name = $1",
		fmt.Sprintf("pg%d", m), lsn).Scan(&behind)
	if err != nil {
		t.Fatalf("reading member %d's flush position: %v", m, err)
	}
	return behind
}

func newPublisher(t *testing.T) *outbox.KafkaPublisher {
	t.Helper()
	producer, err := sarama.NewAsyncProducer(testenv.Brokers(), broker.ProducerConfig("pgha-guard"))
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	pub := outbox.NewKafkaPublisher(producer, "/paylab/orders")
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// topicRecords returns a function counting the records on the one-partition
// topic.
func topicRecords(t *testing.T, topic string) func() int64 {
	t.Helper()
	client, err := sarama.NewClient(testenv.Brokers(), testenv.KafkaConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return func() int64 {
		n, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("reading topic %s's end: %v", topic, err)
		}
		return n
	}
}

// metric is the value of the metric name in reg: a counter's or a gauge's
// value, a histogram's count of observations; 0 before it has any.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) == 0 {
			continue
		}
		m := f.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// histogramSum is the sum of the observations of histogram name in reg.
func histogramSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) > 0 && f.GetMetric()[0].GetHistogram() != nil {
			return f.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	return 0
}
