package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// longContext is a context for tests that outlast testenv.Context's minute.
func longContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// migrate gives a test database the outbox table, with the package's own
// Migrate and the default table name.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return outbox.Migrate(ctx, pool, outbox.Config{})
}

// event builds the sequence-th event of an order on topic.
func event(topic, orderID string, seq int64) outbox.Event {
	return outbox.Event{
		ID:            uuid.Must(uuid.NewV7()),
		AggregateType: "order",
		AggregateID:   orderID,
		Type:          "OrderCaptured",
		Sequence:      seq,
		Topic:         topic,
		Payload:       json.RawMessage(fmt.Sprintf(`{"order_id":%q,"sequence":%d,"schema_version":1}`, orderID, seq)),
		Headers:       map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
}

// enqueue commits events in one transaction.
func enqueue(t testing.TB, ctx context.Context, pool *pgxpool.Pool, events ...outbox.Event) {
	t.Helper()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, events...) }); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

// seedOrders commits perOrder events for each of orders orders: one
// transaction per sequence number (an aggregate's events commit in sequence
// order, as the orders service guarantees), shuffled inside it so ids do not
// follow the orders. It returns the event ids.
func seedOrders(t testing.TB, ctx context.Context, pool *pgxpool.Pool, topic string, orders, perOrder int) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for seq := 1; seq <= perOrder; seq++ {
		batch := make([]outbox.Event, orders)
		for o := range orders {
			batch[o] = event(topic, fmt.Sprintf("order-%05d", o), int64(seq))
		}
		rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		for start := 0; start < len(batch); start += 5000 {
			part := batch[start:min(start+5000, len(batch))]
			enqueue(t, ctx, pool, part...)
			for _, e := range part {
				ids[e.ID.String()] = true
			}
		}
	}
	return ids
}

// newKafkaPublisher returns a publisher on brokers, closed at cleanup.
func newKafkaPublisher(t testing.TB, brokers []string) *outbox.KafkaPublisher {
	t.Helper()
	producer, err := sarama.NewAsyncProducer(brokers, testenv.ProducerConfig())
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	pub := outbox.NewKafkaPublisher(producer, "/paylab/orders")
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// startRelay runs a relay until the test ends and returns it.
func startRelay(t testing.TB, pool *pgxpool.Pool, pub outbox.Publisher, cfg outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	r, err := outbox.NewRelay(pool, pub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay %s: %v", r.ID(), err)
		}
	})
	return r
}

func queryInt(t testing.TB, ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func undispatched(t testing.TB, ctx context.Context, pool *pgxpool.Pool) int64 {
	t.Helper()
	return queryInt(t, ctx, pool, "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL")
}

// consumed is one message read back from the topic.
type consumed struct {
	partition int32
	offset    int64
	key       string
	id        string
	sequence  int64
	source    string
}

// consumeAll reads topic from the start on every partition until it has
// seen want distinct event ids and at least wantMessages messages (or the
// timeout passes) and returns the messages per partition, in offset order.
func consumeAll(t testing.TB, brokers []string, topic string, want, wantMessages int, timeout time.Duration) map[int32][]consumed {
	t.Helper()
	consumer, err := sarama.NewConsumer(brokers, testenv.KafkaConfig())
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer consumer.Close()
	partitions, err := consumer.Partitions(topic)
	if err != nil {
		t.Fatalf("partitions of %s: %v", topic, err)
	}
	var (
		mu   sync.Mutex
		out  = map[int32][]consumed{}
		seen = map[string]bool{}
		n    int
		all  = make(chan struct{})
		once sync.Once
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	for _, p := range partitions {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consuming %s/%d: %v", topic, p, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.Close()
			for {
				select {
				case <-stop:
					return
				case m := <-pc.Messages():
					c := consumed{partition: m.Partition, offset: m.Offset, key: string(m.Key)}
					for _, h := range m.Headers {
						switch string(h.Key) {
						case outbox.HeaderID:
							c.id = string(h.Value)
						case outbox.HeaderSource:
							c.source = string(h.Value)
						case outbox.HeaderSequence:
							c.sequence, _ = strconv.ParseInt(string(h.Value), 10, 64)
						}
					}
					mu.Lock()
					out[m.Partition] = append(out[m.Partition], c)
					seen[c.id] = true
					n++
					if len(seen) >= want && n >= wantMessages {
						once.Do(func() { close(all) })
					}
					mu.Unlock()
				}
			}
		}()
	}
	select {
	case <-all:
	case <-time.After(timeout):
	}
	close(stop)
	wg.Wait()
	return out
}

// gauge reads a metric (gauge or counter, without labels unless given) from reg.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return 0
}

// recorder wraps a Publisher and records which relay sent which event.
type recorder struct {
	mu    sync.Mutex
	sends map[string][]string // event id -> relay names, one per acknowledged send
}

func newRecorder() *recorder { return &recorder{sends: map[string][]string{}} }

func (r *recorder) wrap(name string, next outbox.Publisher) outbox.Publisher {
	return outbox.PublisherFunc(func(ctx context.Context, events []outbox.Event) []error {
		errs := next.Publish(ctx, events)
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, e := range events {
			if errs == nil || errs[i] == nil {
				r.sends[e.ID.String()] = append(r.sends[e.ID.String()], name)
			}
		}
		return errs
	})
}

// refusing wraps next: while on is set, the event whose id is *target is
// refused with a transient error (after next's verdict: Kafka may have
// taken it, a copy on the wire), counted in refused.
func refusing(next outbox.Publisher, on *atomic.Bool, target *outbox.Event, refused *atomic.Int64) outbox.Publisher {
	return outbox.PublisherFunc(func(ctx context.Context, events []outbox.Event) []error {
		errs := next.Publish(ctx, events)
		for i, e := range events {
			if e.ID == target.ID && on.Load() {
				if errs == nil {
					errs = make([]error, len(events))
				}
				errs[i] = errors.New("injected: the broker refused the event")
				refused.Add(1)
			}
		}
		return errs
	})
}
