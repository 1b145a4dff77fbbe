package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/ledger/internal/ledger"
)

// TestEndToEndLatency measures the whole path at a steady, moderate rate
// (200 payments/s for 30 s): the commit of an order's transaction with its
// outbox row, the relay's wake-up by NOTIFY, the publish, the ledger's
// inbox transaction. Latency is from Commit returning in the writer to the
// ledger's transaction having committed (inbox.Config.AfterCommit). A
// measurement, skipped unless PAYLAB_THROUGHPUT is set; run it without -race.
func TestEndToEndLatency(t *testing.T) {
	if os.Getenv("PAYLAB_THROUGHPUT") == "" {
		t.Skip("a measurement: set PAYLAB_THROUGHPUT=1")
	}
	const rate, duration = 200, 30 * time.Second
	f := newFixture(t, 6)
	orders, _ := testenv.NewPool(t, "orders")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var (
		mu      sync.Mutex
		applied = map[string]time.Time{}
	)
	runner, err := inbox.NewRunner(f.Pool, inbox.Config{
		Brokers: testenv.Brokers(), Topic: f.Topic, Group: "latency-" + f.Topic, DeadLetterTopic: f.DLQ,
		Handlers: ledger.Handlers(), BatchHandler: ledger.Apply, BatchSize: 500,
		Sarama: broker.Config("ledger"), ProducerSarama: broker.ProducerConfig("ledger"),
		AfterCommit: func(_ context.Context, msg inbox.Message, outcome inbox.Outcome) error {
			if outcome == inbox.Processed {
				now := time.Now()
				mu.Lock()
				applied[msg.ID.String()] = now
				mu.Unlock()
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	producer, err := sarama.NewAsyncProducer(testenv.Brokers(), broker.ProducerConfig("latency-relay"))
	if err != nil {
		t.Fatal(err)
	}
	pub := outbox.NewKafkaPublisher(producer, "/paylab/orders")
	defer pub.Close()
	relay, err := outbox.NewRelay(orders, pub, outbox.RelayConfig{ID: "latency"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	for _, run := range []func(context.Context) error{runner.Run, relay.Run} {
		running.Add(1)
		go func() { defer running.Done(); _ = run(rctx) }()
	}
	defer func() { stop(); running.Wait() }()
	testenv.Eventually(t, 30*time.Second, "the ledger in its group", runner.Ready)

	committed, achieved := testenv.EnqueueAtRate(t, orders, rate, duration, func(i int) outbox.Event {
		e := testenv.OrderCaptured(fmt.Sprintf("ord-%06d", i), fmt.Sprintf("cus_%d", i%1000), fmt.Sprintf("mer_%d", i%50), 1999, "EUR")
		e.Topic = f.Topic
		return *e
	})
	testenv.Eventually(t, time.Minute, "every payment in the ledger", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(applied) >= len(committed)
	})

	mu.Lock()
	defer mu.Unlock()
	lat := make([]time.Duration, 0, len(committed))
	for id, c := range committed {
		lat = append(lat, applied[id].Sub(c))
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
	t.Logf("MEASURE end to end (commit → ledger committed): %d payments at %.0f/s over %v: p50 %v p90 %v p99 %v max %v",
		len(lat), achieved, duration, q(0.50), q(0.90), q(0.99), lat[len(lat)-1].Round(10*time.Microsecond))
}
