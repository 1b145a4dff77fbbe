package inbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/inbox/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama's metrics registry and pgx pool health checks outlive Close briefly.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	)
}

// migrate gives a test database the inbox tables, with the package's own
// Migrate and the default table name.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return inbox.Migrate(ctx, pool, inbox.Config{})
}

// fixture is a topic, its dead-letter topic and a database with an "effects"
// table that the test handler writes to.
type fixture struct {
	t     *testing.T
	pool  *pgxpool.Pool
	topic string
	dlq   string
	prod  sarama.SyncProducer
}

func setup(t *testing.T) *fixture {
	t.Helper()
	pool, _ := testenv.NewPool(t, migrate)
	f := &fixture{t: t, pool: pool, topic: testenv.NewTopic(t, 1), dlq: testenv.NewTopic(t, 1)}
	if _, err := pool.Exec(testenv.Context(t), `CREATE TABLE effects (
		id bigserial PRIMARY KEY, event_id uuid NOT NULL, aggregate_id text NOT NULL, sequence bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	prod, err := sarama.NewSyncProducer(testenv.Brokers(), testenv.ProducerConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	f.prod = prod
	return f
}

// recordEffect is a Handler that writes one row per application.
func recordEffect(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
	_, err := tx.Exec(ctx, "INSERT INTO effects (event_id, aggregate_id, sequence) VALUES ($1, $2, $3)",
		msg.ID, msg.Subject, msg.Sequence)
	return err
}

func (f *fixture) config(mut ...func(*inbox.Config)) inbox.Config {
	cfg := inbox.Config{
		Brokers:         testenv.Brokers(),
		Topic:           f.topic,
		Group:           "g-" + f.topic,
		DeadLetterTopic: f.dlq,
		Handlers:        map[string]inbox.Handler{"OrderCaptured": recordEffect, "OrderRefunded": recordEffect},
		RetryBackoff:    10 * time.Millisecond,
		RetryMaxBackoff: 50 * time.Millisecond,
		SweepInterval:   200 * time.Millisecond,
		Sarama:          testenv.KafkaConfig(),
		ProducerSarama:  testenv.ProducerConfig(),
	}
	for _, m := range mut {
		m(&cfg)
	}
	return cfg
}

// start runs a Runner until the test ends.
func (f *fixture) start(cfg inbox.Config) *inbox.Runner {
	f.t.Helper()
	r, err := inbox.NewRunner(f.pool, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("runner: %v", err)
		}
	})
	return r
}

// cloudEvent is an event as a producer sends it: a CloudEvents binary-mode
// Kafka message (the contract package inbox decodes, written here
// independently of any producer library).
type cloudEvent struct {
	ID            uuid.UUID
	AggregateType string
	AggregateID   string
	Type          string
	SchemaVersion int
	Sequence      int64
	OccurredAt    time.Time
	Payload       json.RawMessage
	Headers       map[string]string // extra headers, e.g. traceparent
	Topic         string
}

// ProducerMessage is the event as a Kafka message from source: key the
// aggregate id, value the payload, the attributes as ce_ headers.
func (e *cloudEvent) ProducerMessage(source string) *sarama.ProducerMessage {
	headers := map[string]string{
		inbox.HeaderSpecVersion:   "1.0",
		inbox.HeaderID:            e.ID.String(),
		inbox.HeaderSource:        source,
		inbox.HeaderType:          e.Type,
		inbox.HeaderTime:          e.OccurredAt.UTC().Format(time.RFC3339Nano),
		inbox.HeaderSubject:       e.AggregateID,
		inbox.HeaderSchemaVersion: strconv.Itoa(max(e.SchemaVersion, 1)),
		"ce_aggregatetype":        e.AggregateType,
		inbox.HeaderContentType:   "application/json",
	}
	if e.Sequence > 0 {
		headers[inbox.HeaderSequence] = strconv.FormatInt(e.Sequence, 10)
	}
	maps.Copy(headers, e.Headers)
	pm := &sarama.ProducerMessage{Topic: e.Topic, Key: sarama.StringEncoder(e.AggregateID), Value: sarama.ByteEncoder(e.Payload)}
	for k, v := range headers {
		pm.Headers = append(pm.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	return pm
}

func event(orderID string, seq int64, typ string) *cloudEvent {
	return &cloudEvent{
		ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: orderID, Type: typ,
		SchemaVersion: 1, Sequence: seq, OccurredAt: time.Now(),
		Payload: json.RawMessage(fmt.Sprintf(`{"schema_version":1,"sequence":%d,"order_id":%q}`, seq, orderID)),
	}
}

func (f *fixture) publish(events ...*cloudEvent) {
	f.t.Helper()
	for _, e := range events {
		e.Topic = f.topic
		if _, _, err := f.prod.SendMessage(e.ProducerMessage("/paylab/orders")); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) publishRaw(pm *sarama.ProducerMessage) {
	f.t.Helper()
	pm.Topic = f.topic
	if _, _, err := f.prod.SendMessage(pm); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) count(query string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(testenv.Context(f.t), query, args...).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// readDLQ reads n messages from the dead-letter topic.
func (f *fixture) readDLQ(n int) []*sarama.ConsumerMessage {
	f.t.Helper()
	c, err := sarama.NewConsumer(testenv.Brokers(), testenv.KafkaConfig())
	if err != nil {
		f.t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(f.dlq, 0, sarama.OffsetOldest)
	if err != nil {
		f.t.Fatal(err)
	}
	defer pc.Close()
	var out []*sarama.ConsumerMessage
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			out = append(out, m)
		case <-timeout:
			f.t.Fatalf("read %d of %d dead letters", len(out), n)
		}
	}
	return out
}

func header(m *sarama.ConsumerMessage, key string) string {
	for _, h := range m.Headers {
		if string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}

var errBoom = errors.New("boom")
