package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// sendCounter wraps a Publisher and counts, per event id, the sends that
// were not acknowledged.
type sendCounter struct {
	mu     sync.Mutex
	failed map[string]int
}

func (c *sendCounter) wrap(next outbox.Publisher) outbox.Publisher {
	c.failed = map[string]int{}
	return outbox.PublisherFunc(func(ctx context.Context, events []outbox.Event) []error {
		errs := next.Publish(ctx, events)
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, e := range events {
			if errs != nil && errs[i] != nil {
				c.failed[e.ID.String()]++
			}
		}
		return errs
	})
}

func (c *sendCounter) failures(id uuid.UUID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed[id.String()]
}

// An event that Kafka keeps refusing with a transient error (its topic does
// not exist; the broker does not create topics) while everything around it
// goes through is not a broker outage: its attempts count, and after
// MaxAttempts it is parked with the reason and the stream moves on. The
// later events of its order are parked behind it; every other event is
// published. Both ways a poison event meets the relay are covered: alone
// in its transaction with the relay idle (a publish of that one event) and
// in a transaction with events of other orders.
func TestWALRelayParksAnEventThatKeepsFailingAlone(t *testing.T) {
	t.Parallel()
	// Below three: after three failures in a row for a topic, the producer
	// stops asking the broker about it for 10 s (its circuit breaker), and
	// the breaker's timer would outlive the test.
	const maxAttempts = 2
	f := walSetup(t, 3)
	ctx := longContext(t, 3*time.Minute)
	// Topics never created, one per poison event.
	missing := []string{"t-missing-" + uuid.NewString()[:8], "t-missing-" + uuid.NewString()[:8]}
	reg := prometheus.NewRegistry()
	cfg := f.config(t, "wal-0", reg)
	cfg.MaxAttempts = maxAttempts
	cfg.RetryBackoff, cfg.RetryMaxBackoff = 20*time.Millisecond, 100*time.Millisecond
	var sends sendCounter
	startWALRelay(t, f, sends.wrap(newKafkaPublisher(t, testenv.Brokers())), cfg)

	published := seedBacklog(t, ctx, f.pool, f.topic, "before", 40, 10)
	testenv.Eventually(t, time.Minute, "the first events published", func() bool { return dispatched(t, ctx, f.pool) == 40 })

	// Alone: the relay is idle, the transaction has this one event.
	lone := event(missing[0], "order-lone", 1)
	enqueue(t, ctx, f.pool, lone)
	// Among others: one transaction with events of three other orders.
	shared := event(missing[1], "order-shared", 1)
	neighbours := []outbox.Event{event(f.topic, "neighbour-1", 1), event(f.topic, "neighbour-2", 1), event(f.topic, "neighbour-3", 1)}
	enqueue(t, ctx, f.pool, append([]outbox.Event{neighbours[0], shared}, neighbours[1:]...)...)
	for _, e := range neighbours {
		published[e.ID.String()] = true
	}
	// The poisoned orders' next events, each in a later transaction, with
	// more traffic of other orders.
	behind := []outbox.Event{event(f.topic, "order-lone", 2), event(f.topic, "order-shared", 2), event(f.topic, "order-lone", 3)}
	for i, e := range behind {
		enqueue(t, ctx, f.pool, e)
		for id := range seedBacklog(t, ctx, f.pool, f.topic, fmt.Sprintf("after-%d", i), 20, 5) {
			published[id] = true
		}
	}

	parked := func() int64 {
		return queryInt(t, ctx, f.pool, "SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL")
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("at the end: %d parked, %d of %d dispatched; sends failed: lone %d, shared %d; outage batches %v",
				parked(), dispatched(t, ctx, f.pool), len(published), sends.failures(lone.ID), sends.failures(shared.ID),
				metricValue(t, reg, "outbox_outage_batches_total"))
		}
	})
	testenv.Eventually(t, 2*time.Minute, "the poison events and the events behind them parked, the rest published", func() bool {
		return parked() == 5 && dispatched(t, ctx, f.pool) == int64(len(published))
	})

	reason := func(e outbox.Event) string {
		var s string
		if err := f.pool.QueryRow(ctx, "SELECT last_error FROM outbox WHERE event_id = $1 AND parked_at IS NOT NULL", e.ID).Scan(&s); err != nil {
			t.Fatalf("event %s of %s: %v", e.ID, e.AggregateID, err)
		}
		return s
	}
	for _, e := range []outbox.Event{lone, shared} {
		if r := reason(e); !strings.Contains(r, fmt.Sprintf("%d attempts failed", maxAttempts)) || !strings.Contains(r, "does not exist") {
			t.Errorf("%s parked with reason %q, want the attempts and Kafka's error", e.AggregateID, r)
		}
		// Each failure counted: parked at MaxAttempts, not sent again.
		if n := sends.failures(e.ID); n != maxAttempts {
			t.Errorf("%s failed %d times, want %d (MaxAttempts); %v stream reconnects", e.AggregateID, n, maxAttempts,
				metricValue(t, reg, "outbox_wal_reconnects_total"))
		}
	}
	for _, e := range behind {
		if r := reason(e); !strings.Contains(r, "an earlier event of order "+e.AggregateID+" is parked") {
			t.Errorf("%s #%d parked with reason %q, want its parked predecessor", e.AggregateID, e.Sequence, r)
		}
		if n := sends.failures(e.ID); n != 0 {
			t.Errorf("%s #%d was sent behind its parked predecessor", e.AggregateID, e.Sequence)
		}
	}
	if got := metricValue(t, reg, "outbox_outage_batches_total"); got != 0 {
		t.Errorf("outage_batches_total = %v: a refused event was taken for a broker outage", got)
	}
	if got := metricValue(t, reg, "outbox_parked_total"); got != 5 {
		t.Errorf("parked_total = %v, want 5", got)
	}
	checkTopic(t, consumeAll(t, testenv.Brokers(), f.topic, len(published), len(published), time.Minute), published, 0)

	admin, err := sarama.NewClusterAdmin(testenv.Brokers(), testenv.KafkaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range missing {
		if _, ok := topics[m]; ok {
			t.Fatalf("the broker created topic %s: the events were not refused for the reason the test assumes", m)
		}
	}
}

// A broker outage (every send fails, transiently) that lasts many times
// MaxAttempts publishes parks nothing in WAL mode either: each publish
// that fails entirely is counted as an outage batch, not as the events'
// attempts, and once the broker is back everything is published in order.
// The other side is TestWALRelayParksAnEventThatKeepsFailingAlone.
func TestWALRelayBrokerOutageParksNothing(t *testing.T) {
	t.Parallel()
	const maxAttempts = 3
	f := walSetup(t, 3)
	ctx := longContext(t, 3*time.Minute)
	reg := prometheus.NewRegistry()
	cfg := f.config(t, "wal-0", reg)
	cfg.MaxAttempts = maxAttempts
	cfg.RetryBackoff, cfg.RetryMaxBackoff, cfg.OutageMaxBackoff = 20*time.Millisecond, 10*time.Second, 100*time.Millisecond
	pub := &switchable{next: newKafkaPublisher(t, testenv.Brokers())}
	startWALRelay(t, f, pub, cfg)

	const orders, perOrder = 12, 3
	ids := map[string]bool{}
	commit := func(seq int64) { // one transaction per sequence, several orders each
		batch := make([]outbox.Event, orders)
		for o := range batch {
			batch[o] = event(f.topic, fmt.Sprintf("order-%02d", o), seq)
			ids[batch[o].ID.String()] = true
		}
		enqueue(t, ctx, f.pool, batch...)
	}
	commit(1)
	testenv.Eventually(t, time.Minute, "the first events published", func() bool { return dispatched(t, ctx, f.pool) == orders })

	pub.down.Store(true)
	for seq := int64(2); seq <= perOrder; seq++ {
		commit(seq)
	}
	parked := func() int64 {
		return queryInt(t, ctx, f.pool, "SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL")
	}
	outageBatches := func() float64 { return metricValue(t, reg, "outbox_outage_batches_total") }
	testenv.Eventually(t, time.Minute, "many more failed publishes than MaxAttempts (or events parked)", func() bool {
		return outageBatches() >= 5*maxAttempts || parked() > 0
	})
	if n := parked(); n != 0 {
		t.Fatalf("%d events parked by a broker outage", n)
	}
	if g := metricValue(t, reg, "outbox_broker_outage"); g != 1 {
		t.Errorf("broker_outage = %v during the outage, want 1", g)
	}
	if n := dispatched(t, ctx, f.pool); n != orders {
		t.Fatalf("%d events dispatched during the outage, want the %d before it", n, orders)
	}

	pub.down.Store(false)
	testenv.Eventually(t, time.Minute, "the backlog published", func() bool { return dispatched(t, ctx, f.pool) == orders*perOrder })
	if n := parked(); n != 0 {
		t.Fatalf("%d events parked after the outage", n)
	}
	testenv.Eventually(t, 5*time.Second, "the outage gauge back to 0", func() bool {
		return metricValue(t, reg, "outbox_broker_outage") == 0
	})
	checkTopic(t, consumeAll(t, testenv.Brokers(), f.topic, len(ids), len(ids), time.Minute), ids, perOrder)
}
