package outbox_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// The measurements below report figures; they assert nothing about speed.
// They are skipped unless PAYLAB_MEASURE=1:
//
//	cd pkg/outbox && PAYLAB_MEASURE=1 go test -count=1 -v -run '^TestMeasure' -timeout 30m .
func skipUnlessMeasuring(t *testing.T) {
	t.Helper()
	if os.Getenv("PAYLAB_MEASURE") != "1" {
		t.Skip("set PAYLAB_MEASURE=1 to run the relay measurements")
	}
}

// Drain rate: a pre-seeded backlog of 100 000 events (one per order),
// drained by 1 and by 3 relays with the default configuration. The relays'
// statements are counted by name, per claimed batch.
func TestMeasureDrainRate(t *testing.T) {
	skipUnlessMeasuring(t)
	const backlog = 100_000
	for _, relays := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d relays", relays), func(t *testing.T) {
			pool, dbURL := testenv.NewPool(t, migrate)
			topic := testenv.NewTopic(t, 6)
			ctx := longContext(t, 15*time.Minute)
			seedOrders(t, ctx, pool, topic, backlog, 1)
			if _, err := pool.Exec(ctx, "VACUUM ANALYZE outbox"); err != nil {
				t.Fatal(err)
			}
			relayPool, counter := testenv.CountingPool(t, dbURL)
			var regs []*prometheus.Registry
			start := time.Now()
			for i := range relays {
				reg := prometheus.NewRegistry()
				regs = append(regs, reg)
				startRelay(t, relayPool, newKafkaPublisher(t, testenv.Brokers()),
					outbox.RelayConfig{ID: fmt.Sprintf("relay-%d", i), Registerer: reg})
			}
			deadline := time.Now().Add(10 * time.Minute)
			for undispatched(t, ctx, pool) > 0 {
				if time.Now().After(deadline) {
					t.Fatal("backlog not drained in 10 minutes")
				}
				time.Sleep(100 * time.Millisecond)
			}
			took := time.Since(start)
			batches := 0.0
			for _, reg := range regs {
				batches += metricValue(t, reg, "outbox_batch_size")
			}
			byName := counter.Counts()
			statements := byName["ClaimBatch"] + byName["CompleteBatch"] + byName["RenewLeases"]
			t.Logf("MEASURE drain: %d events, %d relay(s), %v → %.0f events/s; %.0f batches, %d claim/mark/renew statements (%.2f per batch), all statements %v",
				backlog, relays, took.Round(time.Millisecond), backlog/took.Seconds(), batches, statements,
				float64(statements)/batches, byName)
		})
	}
}

// The raw baselines of the drain rate: the same 100 000 messages (the same
// shape: key, CloudEvents headers, traceparent, payload) sent by a bare
// sarama AsyncProducer with the relay's producer settings
// (testenv.ProducerConfig), no database involved: streamed as fast as the
// producer takes them, and in batches of the relay's default size, each
// batch's acks awaited before the next is sent (the relay's publish step on
// its own). The relay's drain rate is read as a ratio to these.
func TestMeasureRawProducer(t *testing.T) {
	skipUnlessMeasuring(t)
	const total = 100_000
	for _, batch := range []int{total, outbox.DefaultBatchSize} {
		name := "streamed"
		if batch < total {
			name = fmt.Sprintf("batches of %d", batch)
		}
		t.Run(name, func(t *testing.T) {
			topic := testenv.NewTopic(t, 6)
			msgs := make([]*sarama.ProducerMessage, total)
			for i := range msgs {
				e := event(topic, fmt.Sprintf("order-%05d", i), 1)
				e.OccurredAt = time.Now()
				msgs[i] = e.ProducerMessage("/paylab/orders")
			}
			producer, err := sarama.NewAsyncProducer(testenv.Brokers(), testenv.ProducerConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer producer.Close()
			start := time.Now()
			for from := 0; from < total; from += batch {
				part := msgs[from:min(from+batch, total)]
				go func() {
					for _, m := range part {
						producer.Input() <- m
					}
				}()
				for range part {
					select {
					case <-producer.Successes():
					case perr := <-producer.Errors():
						t.Fatal(perr.Err)
					}
				}
			}
			took := time.Since(start)
			t.Logf("MEASURE raw producer, %s: %d events, %v → %.0f events/s", name, total, took.Round(time.Millisecond), total/took.Seconds())
		})
	}
}

// Commit → Kafka latency at a steady 200 committed transactions per second
// (one event each) for 30 s, one relay with the default configuration
// (NOTIFY wake-up, 1 s poll fallback). Latency is from Commit returning in
// the producer to the message arriving at a consumer tailing the topic.
func TestMeasureCommitToKafkaLatency(t *testing.T) {
	skipUnlessMeasuring(t)
	const rate, duration = 200, 30 * time.Second
	pool, _ := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 6)
	ctx := longContext(t, 5*time.Minute)
	startRelay(t, pool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{})

	consumer, err := sarama.NewConsumer(testenv.Brokers(), testenv.KafkaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var (
		mu       sync.Mutex
		received = map[string]time.Time{}
		wg       sync.WaitGroup
	)
	cctx, stopConsuming := context.WithCancel(ctx)
	for p := range int32(6) {
		var pc sarama.PartitionConsumer
		testenv.Eventually(t, 10*time.Second, "the new topic consumable", func() bool {
			pc, err = consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
			return err == nil
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.Close()
			for {
				select {
				case <-cctx.Done():
					return
				case m := <-pc.Messages():
					now := time.Now()
					for _, h := range m.Headers {
						if string(h.Key) == outbox.HeaderID {
							mu.Lock()
							if _, dup := received[string(h.Value)]; !dup {
								received[string(h.Value)] = now
							}
							mu.Unlock()
						}
					}
				}
			}
		}()
	}

	committed, achieved := enqueueAtRate(t, pool, rate, duration, func(i int) outbox.Event {
		return event(topic, fmt.Sprintf("order-%06d", i), 1)
	})
	testenv.Eventually(t, time.Minute, "every event received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(received) >= len(committed)
	})
	stopConsuming()
	wg.Wait()

	lat := make([]time.Duration, 0, len(committed))
	for id, c := range committed {
		lat = append(lat, received[id].Sub(c))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
	t.Logf("MEASURE latency: %d events at %.0f/s (target %d/s) over %v: p50 %v p90 %v p99 %v max %v",
		len(lat), achieved, rate, duration, q(0.50), q(0.90), q(0.99), lat[len(lat)-1].Round(10*time.Microsecond))
}

// enqueueAtRate commits one outbox event per tick, rate a second for
// duration — an open model: four writers take the ticks, so a slow commit
// does not lower the rate — each event built by build(i). It returns when
// every write ended: each event's commit time by event id, and the rate
// achieved.
func enqueueAtRate(t testing.TB, pool *pgxpool.Pool, rate int, duration time.Duration, build func(i int) outbox.Event) (map[string]time.Time, float64) {
	t.Helper()
	ctx := context.Background()
	var (
		mu        sync.Mutex
		committed = map[string]time.Time{}
		writers   sync.WaitGroup
	)
	ticks := make(chan int, rate)
	for range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range ticks {
				e := build(i)
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, e) }); err != nil {
					t.Error(err)
					return
				}
				now := time.Now()
				mu.Lock()
				committed[e.ID.String()] = now
				mu.Unlock()
			}
		}()
	}
	ticker := time.NewTicker(time.Second / time.Duration(rate))
	begin, n := time.Now(), 0
	for time.Since(begin) < duration {
		<-ticker.C
		ticks <- n
		n++
	}
	ticker.Stop()
	close(ticks)
	writers.Wait()
	return committed, float64(n) / time.Since(begin).Seconds()
}
