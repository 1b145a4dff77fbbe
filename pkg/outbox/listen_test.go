package outbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// With a poll interval of an hour, only NOTIFY can wake the relay: events
// are published within seconds, also after the listening connection was
// killed (the relay reconnects).
func TestNotifyWakesTheRelayAndTheListenerReconnects(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)
	reg := prometheus.NewRegistry()
	startRelay(t, pool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{
		PollInterval: time.Hour, Registerer: reg, Logger: testLogger(t),
	})
	listeners := func() int64 {
		return queryInt(t, ctx, pool, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'outbox-listener'`)
	}
	testenv.Eventually(t, 10*time.Second, "the listener connected", func() bool { return listeners() == 1 })
	// An event committed before the LISTEN took effect is still found: the
	// listener wakes the relay once after every LISTEN.
	enqueue(t, ctx, pool, event(topic, "order-1", 1))
	testenv.Eventually(t, 10*time.Second, "the event published on NOTIFY", func() bool { return undispatched(t, ctx, pool) == 0 })

	if n := queryInt(t, ctx, pool, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'outbox-listener'`); n != 1 {
		t.Fatalf("terminated %d listener connections, want 1", n)
	}
	testenv.Eventually(t, 10*time.Second, "the listener reconnected", func() bool {
		return metricValue(t, reg, "outbox_listener_reconnects_total") == 1 && listeners() == 1
	})
	enqueue(t, ctx, pool, event(topic, "order-2", 1))
	testenv.Eventually(t, 10*time.Second, "the event published on NOTIFY after the reconnect", func() bool {
		return undispatched(t, ctx, pool) == 0
	})
}

// A PollOnly relay never opens the listening connection (the relay above
// does) and finds its work by the poll interval alone.
func TestPollOnlyRelayDoesNotListen(t *testing.T) {
	t.Parallel()
	pool, dbURL := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)
	relayPool, counter := testenv.CountingPool(t, dbURL)
	startRelay(t, relayPool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{
		PollOnly: true, PollInterval: 100 * time.Millisecond, Logger: testLogger(t),
	})
	enqueue(t, ctx, pool, event(topic, "order-1", 1))
	testenv.Eventually(t, 10*time.Second, "the event published by polling", func() bool { return undispatched(t, ctx, pool) == 0 })
	if n := counter.Counts()["other"]; n != 0 {
		t.Errorf("%d statements other than the relay's queries (a LISTEN?), want none", n)
	}
	if n := queryInt(t, ctx, pool, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'outbox-listener'`); n != 0 {
		t.Errorf("%d listening connections, want none", n)
	}
}

// Under a steady stream of commits, each waking the relay, a claim starts no
// sooner than RoundInterval after the previous one: the rounds are as many
// as the intervals that passed, not one for every event or two.
func TestRelayPacesRoundsUnderAStream(t *testing.T) {
	t.Parallel()
	pool, dbURL := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)
	relayPool, counter := testenv.CountingPool(t, dbURL)
	const interval = 100 * time.Millisecond
	start := time.Now()
	startRelay(t, relayPool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{
		PollInterval: time.Hour, RoundInterval: interval, Logger: testLogger(t),
	})
	const events = 300
	for i := range events {
		enqueue(t, ctx, pool, event(topic, fmt.Sprintf("order-%d", i), 1))
		time.Sleep(2 * time.Millisecond)
	}
	testenv.Eventually(t, 30*time.Second, "every event published", func() bool { return undispatched(t, ctx, pool) == 0 })
	claims, most := counter.Counts()["ClaimBatch"], int(time.Since(start)/interval)+2
	if claims > most {
		t.Fatalf("%d claims in %v, at most %d with a round interval of %v", claims, time.Since(start).Round(time.Millisecond), most, interval)
	}
	t.Logf("%d events in %d claims", events, claims)
}
