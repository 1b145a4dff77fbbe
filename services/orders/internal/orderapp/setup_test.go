package orderapp_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
	"github.com/paylab/paylab/services/orders/internal/syncpub"
)

var payment = order.NewOrder{CustomerID: "cus_42", MerchantID: "mer_7", Amount: 1999, Currency: "EUR"}

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// bundle is a Service under test and its collaborators.
type bundle struct {
	t    *testing.T
	app  *orderapp.Service
	pool *pgxpool.Pool
	reg  *prometheus.Registry
}

// setup returns a Service on a fresh database. In the naive modes it
// publishes to brokers with a real producer.
func setup(t *testing.T, mode orderapp.Mode, topic string, brokers []string, hooks orderapp.Hooks) *bundle {
	t.Helper()
	pool, _ := testenv.NewPool(t, "orders")
	reg := prometheus.NewRegistry()
	cfg := orderapp.Config{
		Pool: pool, Mode: mode, Topic: topic, Hooks: hooks, Registerer: reg,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	if mode != orderapp.ModeOutbox {
		pub := syncpub.New(brokers, "paylab-orders-test")
		t.Cleanup(func() { _ = pub.Close() })
		cfg.Publisher = pub
	}
	app, err := orderapp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{t: t, app: app, pool: pool, reg: reg}
}

func (b *bundle) count(query string, args ...any) int {
	b.t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		b.t.Fatal(err)
	}
	return n
}

func (b *bundle) status(id string) string {
	b.t.Helper()
	var s string
	if err := b.pool.QueryRow(context.Background(), "SELECT status FROM orders WHERE id = $1", id).Scan(&s); err != nil {
		b.t.Fatal(err)
	}
	return s
}

// published is the number of messages in topic: the sum of its partitions'
// high-water marks (the broker's own count, no waiting involved).
func published(t *testing.T, brokers []string, topic string) int64 {
	t.Helper()
	client, err := sarama.NewClient(brokers, testenv.KafkaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, p := range parts {
		hw, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		total += hw
	}
	return total
}

// consumeOne reads the first message of partition 0 of topic, waiting at
// most 30 s.
func consumeOne(t *testing.T, brokers []string, topic string) *sarama.ConsumerMessage {
	t.Helper()
	c, err := sarama.NewConsumer(brokers, testenv.KafkaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		return m
	case <-time.After(30 * time.Second):
		t.Fatalf("no message on %s within 30 s", topic)
		return nil
	}
}

func headers(m *sarama.ConsumerMessage) map[string]string {
	out := map[string]string{}
	for _, h := range m.Headers {
		out[string(h.Key)] = string(h.Value)
	}
	return out
}

// privateTopic creates a one-partition topic on a private broker.
func privateTopic(t *testing.T, brokers []string) string {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, testenv.KafkaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const topic = "order-events-naive"
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	return topic
}
