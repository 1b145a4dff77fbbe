package outboxfaults_test

// The helpers below are those of package outbox's own tests that the tests
// here need, as they are there.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// longContext is a context for tests that outlast testenv.Context's minute.
func longContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
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

// newKafkaPublisher returns a publisher on brokers, closed at cleanup.
func newKafkaPublisher(t testing.TB, brokers []string) *outbox.KafkaPublisher {
	t.Helper()
	producer, err := sarama.NewAsyncProducer(brokers, broker.ProducerConfig("outbox-faults"))
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

// walFixture is a database whose role may read replication slots, a slot
// and publication of its own (created with SetupWAL, dropped at cleanup
// after the test's relays stopped) and a topic. cfg carries the slot's name.
type walFixture struct {
	pool  *pgxpool.Pool
	admin *pgxpool.Pool // superuser, on the same database
	url   string
	topic string
	cfg   outbox.WALConfig
}

// walFixtureOn completes a WAL fixture on the database that pool
// and url reach, on the server that adminURL administers.
func walFixtureOn(t *testing.T, adminURL string, pool *pgxpool.Pool, url string, partitions int32, beforeSlot func(pool *pgxpool.Pool, topic string)) *walFixture {
	t.Helper()
	ctx := testenv.Context(t)
	adminCfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	adminCfg.ConnConfig.Database = pool.Config().ConnConfig.Database
	admin, err := pgxpool.NewWithConfig(ctx, adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	f := &walFixture{pool: pool, admin: admin, url: url, topic: testenv.NewTopic(t, partitions),
		cfg: outbox.WALConfig{Slot: "t_wal_" + uuid.NewString()[:8]}}
	// The relay deletes what it published (unless KeepDispatched): a
	// trigger keeps the deleted ids, so dispatched counts them.
	if _, err := admin.Exec(ctx, `CREATE TABLE outbox_deleted (id bigint PRIMARY KEY);
		CREATE FUNCTION outbox_deleted() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN INSERT INTO outbox_deleted VALUES (OLD.id); RETURN OLD; END$$;
		CREATE TRIGGER outbox_deleted AFTER DELETE ON outbox FOR EACH ROW EXECUTE FUNCTION outbox_deleted();
		GRANT SELECT, INSERT ON outbox_deleted TO `+pgx.Identifier{pool.Config().ConnConfig.User}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if beforeSlot != nil {
		beforeSlot(pool, f.topic)
	}
	if err := outbox.SetupWAL(ctx, pool, f.cfg); err != nil {
		t.Fatal(err)
	}
	// Registered before the relays start, so it runs after they stopped.
	t.Cleanup(func() { f.dropSlot(t) })
	return f
}

// dropSlot drops the test's slot, ending a walsender still attached to it.
func (f *walFixture) dropSlot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		_, _ = f.admin.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active", f.cfg.Slot)
		if err = outbox.DropWAL(ctx, f.admin, f.cfg); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("dropping slot %s: %v", f.cfg.Slot, err)
}

// config returns the fixture's config for a relay named id.
func (f *walFixture) config(t *testing.T, id string, reg prometheus.Registerer) outbox.WALConfig {
	c := f.cfg
	c.ID, c.Registerer, c.Logger = id, reg, testLogger(t)
	c.BatchSize, c.LeaseTTL, c.PollInterval = 500, 3*time.Second, 100*time.Millisecond
	c.RetryBackoff, c.OutageMaxBackoff = 50*time.Millisecond, 200*time.Millisecond
	return c
}

// runningRelay is a WAL relay running in the test's process.
type runningRelay struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// stop stops the relay cleanly and returns Run's error.
func (rr *runningRelay) stop() error {
	rr.once.Do(func() { rr.cancel(); rr.err = <-rr.done })
	return rr.err
}

// startWALRelay runs a WAL relay until the test ends (or stop).
func startWALRelay(t *testing.T, f *walFixture, pub outbox.Publisher, cfg outbox.WALConfig) *runningRelay {
	t.Helper()
	r, err := outbox.NewWALRelay(f.pool, f.url, pub, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr := &runningRelay{cancel: cancel, done: make(chan error, 1)}
	go func() { rr.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		if err := rr.stop(); err != nil {
			t.Errorf("WAL relay %s: %v", cfg.ID, err)
		}
	})
	return rr
}

func dispatched(t testing.TB, ctx context.Context, pool *pgxpool.Pool) int64 {
	t.Helper()
	return queryInt(t, ctx, pool, `SELECT (SELECT count(*) FROM outbox WHERE dispatched_at IS NOT NULL)
		+ (SELECT count(*) FROM outbox_deleted)`)
}
