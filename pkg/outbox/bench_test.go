package outbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// Micro-benchmarks of the relay's hot paths; `paylab bench` (make bench)
// measures the relay as a whole against a raw producer.
//
//	go test -run '^$' -bench . ./pkg/outbox/

// BenchmarkProducerMessage: encoding an event as the Kafka message the relay
// sends (key, CloudEvents headers, a traceparent, the payload).
func BenchmarkProducerMessage(b *testing.B) {
	e := event("order-events", "0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d", 1)
	b.ReportAllocs()
	for b.Loop() {
		m := e.ProducerMessage("/paylab/orders")
		if len(m.Headers) < 10 {
			b.Fatalf("%d headers", len(m.Headers))
		}
	}
}

// BenchmarkClaimBatch: the claim statement alone — one UPDATE … FOR UPDATE
// SKIP LOCKED leasing a batch from a backlog of 5 000 to 10 000 events (and
// the dispatched history the benchmark leaves behind).
// The timer stops when the batch is leased (the AfterLease hook); publishing
// (to a publisher that acknowledges at once) and recording the outcome are
// not timed.
func BenchmarkClaimBatch(b *testing.B) {
	for _, batch := range []int{50, 500} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			pool, _ := testenv.NewPool(b, migrate)
			ctx := context.Background()
			acked := outbox.PublisherFunc(func(context.Context, []outbox.Event) []error { return nil })
			r, err := outbox.NewRelay(pool, acked, outbox.RelayConfig{BatchSize: batch, Hooks: outbox.Hooks{
				AfterLease: func(context.Context) error { b.StopTimer(); return nil },
			}})
			if err != nil {
				b.Fatal(err)
			}
			const low = 5000
			pending, refills := 0, 0
			b.ResetTimer()
			for range b.N {
				if pending < low+batch {
					b.StopTimer()
					refills++
					refill(b, ctx, pool, refills, low)
					pending += low
				}
				b.StartTimer()
				res, err := r.RunBatch(ctx)
				if err != nil || res.Claimed != batch || res.Dispatched != batch {
					b.Fatalf("batch: %+v, %v", res, err)
				}
				pending -= batch
			}
		})
	}
}

// refill commits n more events, one per order, in transactions of 5000.
func refill(b *testing.B, ctx context.Context, pool *pgxpool.Pool, round, n int) {
	b.Helper()
	events := make([]outbox.Event, 0, 5000)
	for i := range n {
		events = append(events, event("order-events", fmt.Sprintf("order-%d-%d", round, i), 1))
		if len(events) == cap(events) || i == n-1 {
			enqueue(b, ctx, pool, events...)
			events = events[:0]
		}
	}
}
