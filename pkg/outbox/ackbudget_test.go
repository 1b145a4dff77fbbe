package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// lateAcks wraps a publisher so that its acknowledgements reach the relay
// only after delay: the messages are on the wire at once, the relay hears of
// it late, as under a loaded broker or machine. Like KafkaPublisher, it stops
// waiting when ctx ends and reports the events as unacknowledged.
func lateAcks(next outbox.Publisher, delay time.Duration) outbox.Publisher {
	return outbox.PublisherFunc(func(ctx context.Context, events []outbox.Event) []error {
		start := time.Now()
		errs := next.Publish(ctx, events)
		select {
		case <-time.After(time.Until(start.Add(delay))):
			return errs
		case <-ctx.Done():
			errs = make([]error, len(events))
			for i := range errs {
				errs[i] = fmt.Errorf("waiting for the broker's ack: %w", ctx.Err())
			}
			return errs
		}
	})
}

// Acknowledgements that outlast the ack budget (half the lease) and the
// lease itself, from both sides. With the default MaxPublishWait the relay
// renews its lease while it waits: a second relay polling all along takes
// nothing over, and every event is on the topic once. Giving up at the
// budget instead (MaxPublishWait = half the TTL, the old behaviour) releases
// events that were in fact sent, and they go on the wire a second time.
func TestSlowAcksRenewTheLeaseInsteadOfRepublishing(t *testing.T) {
	t.Parallel()
	const ttl, delay, events = 4 * time.Second, 5200 * time.Millisecond, 20
	for _, tc := range []struct {
		name           string
		maxPublishWait time.Duration
		wantDuplicates bool
	}{
		{name: "lease renewed while acks are pending", maxPublishWait: 0, wantDuplicates: false},
		{name: "giving up at the ack budget", maxPublishWait: ttl / 2, wantDuplicates: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := testenv.NewPool(t, migrate)
			topic := testenv.NewTopic(t, 3)
			ctx := longContext(t, 2*time.Minute)
			batch := make([]outbox.Event, events)
			for i := range batch {
				batch[i] = event(topic, fmt.Sprintf("order-%02d", i), 1)
			}
			enqueue(t, ctx, pool, batch...)

			regA := prometheus.NewRegistry()
			a, err := outbox.NewRelay(pool, lateAcks(newKafkaPublisher(t, testenv.Brokers()), delay), outbox.RelayConfig{
				ID: "A", LeaseTTL: ttl, MaxPublishWait: tc.maxPublishWait, RetryBackoff: 100 * time.Millisecond,
				Registerer: regA, Logger: testLogger(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			aDone := make(chan outbox.BatchResult, 1)
			go func() {
				res, err := a.RunBatch(ctx)
				if err != nil {
					t.Errorf("A: %v", err)
				}
				aDone <- res
			}()
			testenv.Eventually(t, 10*time.Second, "A's claim", func() bool {
				return queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE lease_owner = 'A'") == events
			})
			// B polls all along, ready to take over any lease that runs out.
			regB := prometheus.NewRegistry()
			startRelay(t, pool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{
				ID: "B", LeaseTTL: ttl, PollInterval: 50 * time.Millisecond, Registerer: regB, Logger: testLogger(t),
			})
			resA := <-aDone
			testenv.Eventually(t, 30*time.Second, "every event dispatched", func() bool {
				return undispatched(t, ctx, pool) == 0
			})

			want := events
			if tc.wantDuplicates {
				want = 2 * events
			}
			onTopic := consumeAll(t, testenv.Brokers(), topic, events, want, 15*time.Second)
			total := 0
			for _, msgs := range onTopic {
				total += len(msgs)
			}
			renewals := metricValue(t, regA, "outbox_lease_renewals_total")
			reclaims := metricValue(t, regB, "outbox_lease_reclaims_total")
			t.Logf("A: %+v; lease renewals %v; B's reclaims %v; %d messages on the topic for %d events", resA, renewals, reclaims, total, events)
			if !tc.wantDuplicates {
				if total != events || resA.Dispatched != events || reclaims != 0 || renewals == 0 {
					t.Fatalf("want every event once on the topic, dispatched by A under a renewed lease, none taken over")
				}
				if n := queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE attempts = 1 AND dispatched_at IS NOT NULL"); n != events {
					t.Fatalf("%d events dispatched at the first attempt, want %d", n, events)
				}
				return
			}
			if total <= events || resA.Dispatched != 0 {
				t.Fatalf("giving up at the budget: want A to release the events and duplicates on the wire")
			}
		})
	}
}
