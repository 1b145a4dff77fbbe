package outbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// The broker outage with a real broker stopped and started again is
// TestKafkaOutageBacklogGrowsThenDrains in paylab's internal/testkit/outboxfaults
// (it needs a Kafka of its own to stop).

// switchable fails every event while down (a broker outage as the relay
// sees it through the Publisher interface), and otherwise delegates.
type switchable struct {
	next outbox.Publisher
	down atomic.Bool
}

func (s *switchable) Publish(ctx context.Context, events []outbox.Event) []error {
	if !s.down.Load() {
		return s.next.Publish(ctx, events)
	}
	errs := make([]error, len(events))
	for i := range errs {
		errs[i] = errors.New("kafka: client has run out of available brokers (injected outage)")
	}
	return errs
}

// A broker outage (every event of every batch fails, transiently) lasting
// many times MaxAttempts batches parks nothing and counts no attempt; the
// relay probes at most once per OutageMaxBackoff instead of claiming batch
// after batch, and when the broker returns the backlog is published within
// about that backoff, not after the per-event RetryMaxBackoff. The other
// side (failures that others in the batch do not share count and park) is
// TestTransientFailuresRetryWithBackoffThenPark.
func TestBrokerOutageParksNothingAndDrainsPromptly(t *testing.T) {
	t.Parallel()
	const (
		maxAttempts = 3
		outageMax   = 200 * time.Millisecond
		orders      = 10
	)
	pool, _ := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 3)
	ctx := longContext(t, 4*time.Minute)
	ids := seedOrders(t, ctx, pool, topic, orders, 3)
	pub := &switchable{next: newKafkaPublisher(t, testenv.Brokers())}
	pub.down.Store(true)
	reg := prometheus.NewRegistry()
	startRelay(t, pool, pub, outbox.RelayConfig{
		BatchSize: orders / 2, PollInterval: 20 * time.Millisecond, StatsInterval: 50 * time.Millisecond,
		RetryBackoff: 20 * time.Millisecond, RetryMaxBackoff: 10 * time.Second, OutageMaxBackoff: outageMax,
		MaxAttempts: maxAttempts, Registerer: reg, Logger: testLogger(t),
	})
	outageBatches := func() float64 { return metricValue(t, reg, "outbox_outage_batches_total") }
	testenv.Eventually(t, 30*time.Second, "many more outage batches than MaxAttempts", func() bool {
		return outageBatches() >= 5*maxAttempts
	})
	if g := metricValue(t, reg, "outbox_broker_outage"); g != 1 {
		t.Fatalf("broker_outage gauge = %v during the outage, want 1", g)
	}
	// The pause: at the cap, one probe batch per OutageMaxBackoff, although
	// a full batch of claimable events is always waiting (a relay claiming
	// on would send two batches per backoff).
	before := outageBatches()
	time.Sleep(time.Second) // a window to measure the probe rate over
	if n := outageBatches() - before; n > float64(time.Second/outageMax)+2 {
		t.Fatalf("%v outage batches in 1s, want at most one per %v", n, outageMax)
	}
	if n := queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL"); n != 0 {
		t.Fatalf("%d events parked by a broker outage", n)
	}
	// At rest an event has no attempt counted; one being probed has one.
	if n := queryInt(t, ctx, pool, "SELECT COALESCE(max(attempts), 0) FROM outbox"); n > 1 {
		t.Fatalf("attempts reached %d during the outage, want them not counted", n)
	}
	if n := queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE last_error LIKE '%injected outage%'"); n == 0 {
		t.Fatal("no event has the outage recorded as its last error")
	}
	if n := undispatched(t, ctx, pool); n != int64(len(ids)) {
		t.Fatalf("%d undispatched during the outage, want %d", n, len(ids))
	}

	// No event waits out a per-event backoff (RetryMaxBackoff is 10 s): a
	// released event is claimable again within OutageMaxBackoff, on the
	// database clock. With outage handling off, the backoffs grow towards
	// RetryMaxBackoff and this fails.
	var wait float64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(EXTRACT(EPOCH FROM max(leased_until) - now()), 0)::float8
		FROM outbox WHERE lease_owner IS NULL AND dispatched_at IS NULL`).Scan(&wait); err != nil {
		t.Fatal(err)
	}
	if time.Duration(wait*float64(time.Second)) > outageMax {
		t.Fatalf("an event waits %.3fs for its next attempt, want at most OutageMaxBackoff %v", wait, outageMax)
	}

	pub.down.Store(false)
	back := time.Now()
	testenv.Eventually(t, 2*time.Minute, "the backlog drained", func() bool { return undispatched(t, ctx, pool) == 0 })
	t.Logf("%v outage batches; drained %v after the broker returned (OutageMaxBackoff %v, RetryMaxBackoff 10s)",
		outageBatches(), time.Since(back).Round(time.Millisecond), outageMax)
	if n := queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE attempts <> 1"); n != 0 {
		t.Fatalf("%d events with attempts ≠ 1: only the successful attempt should count", n)
	}
	testenv.Eventually(t, 5*time.Second, "the outage gauge back to 0", func() bool {
		return metricValue(t, reg, "outbox_broker_outage") == 0
	})
	onTopic := consumeAll(t, testenv.Brokers(), topic, len(ids), len(ids), 30*time.Second)
	seen := 0
	for _, msgs := range onTopic {
		for _, m := range msgs {
			if ids[m.id] {
				seen++
			}
		}
	}
	if seen != len(ids) {
		t.Fatalf("%d of %d events on the topic", seen, len(ids))
	}
}
