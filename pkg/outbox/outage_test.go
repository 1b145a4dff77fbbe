package outbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/broker"
	"github.com/paylab/paylab/internal/testenv"
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
	startRelay(t, pool, newKafkaPublisher(t, k.Brokers()), outbox.Config{
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
		return metricValue(t, reg, "paylab_outbox_pending") == 100 &&
			metricValue(t, reg, "paylab_outbox_oldest_pending_age_seconds") > 1
	})
	age := metricValue(t, reg, "paylab_outbox_oldest_pending_age_seconds")
	testenv.Eventually(t, 20*time.Second, "the oldest pending age growing", func() bool {
		return metricValue(t, reg, "paylab_outbox_oldest_pending_age_seconds") > age+1
	})
	testenv.Eventually(t, 30*time.Second, "publish attempts failing", func() bool {
		return metricValue(t, reg, "paylab_outbox_publish_errors_total", "kind", "transient") > 0
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
		return metricValue(t, reg, "paylab_outbox_pending") == 0 &&
			metricValue(t, reg, "paylab_outbox_oldest_pending_age_seconds") == 0
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
		len(all), metricValue(t, reg, "paylab_outbox_publish_errors_total", "kind", "transient"))
}
