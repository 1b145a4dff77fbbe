package shop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"example.com/shop"
	"github.com/paylab/paylab/pkg/inbox"
)

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

var (
	adminURL = env("PAYLAB_ADMIN_DATABASE_URL", "postgres://postgres:postgres@127.0.0.1:55432/postgres?sslmode=disable")
	brokers  = strings.Split(env("KAFKA_BROKERS", "127.0.0.1:59092"), ",")
)

// newDatabase creates a database of the test's own, dropped when it ends,
// and returns a pool on it.
func newDatabase(t *testing.T, ctx context.Context) *pgxpool.Pool {
	t.Helper()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("connecting as admin: %v", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	name := fmt.Sprintf("shop_test_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("dropping %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newTopic creates a topic of the test's own, deleted when it ends.
func newTopic(t *testing.T) string {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatalf("connecting to Kafka: %v", err)
	}
	topic := fmt.Sprintf("shop.cart-events.test-%d", time.Now().UnixNano())
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.DeleteTopic(topic)
		admin.Close()
	})
	return topic
}

// eventually polls cond until it holds or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		<-tick.C
	}
}

func count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The whole path with the shop's own table names: checkout over HTTP writes
// the cart and the event in one transaction, the relay publishes it, and the
// fulfilment consumer ships it once — also when the event is published two
// more times.
func TestCheckoutShipsOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool := newDatabase(t, ctx)
	for range 2 { // idempotent
		if err := shop.Migrate(ctx, pool); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	}
	topic := newTopic(t)

	producer, err := sarama.NewAsyncProducer(brokers, shop.ProducerConfig())
	if err != nil {
		t.Fatal(err)
	}
	relay, pub, err := shop.NewRelay(pool, producer, log)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := inbox.NewRunner(pool, shop.FulfilmentConfig(brokers, topic, "shop-fulfilment-"+topic, log))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- relay.Run(runCtx) }()
	go func() { done <- runner.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("stopping: %v", err)
			}
		}
		pub.Close()
	})

	carts, err := shop.NewCarts(pool, topic)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(carts.Routes())
	defer srv.Close()
	checkout := func() *http.Response {
		t.Helper()
		resp, err := http.Post(srv.URL+"/carts/cart-7/checkout?total_cents=1999", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := checkout()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("checkout: status %d", resp.StatusCode)
	}
	var body struct {
		EventID string `json:"event_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp := checkout(); resp.StatusCode != http.StatusConflict {
		t.Errorf("second checkout: status %d, want 409", resp.StatusCode)
	}

	eventually(t, time.Minute, "the shipment", func() bool {
		return count(t, pool, "SELECT count(*) FROM shipments WHERE cart_id = 'cart-7'") == 1
	})
	if got := count(t, pool, "SELECT count(*) FROM shop_outbox WHERE event_id = $1 AND dispatched_at IS NOT NULL", body.EventID); got != 1 {
		t.Errorf("%d dispatched rows of the event in shop_outbox, want 1", got)
	}

	// Publish the very same event twice more, as a relay that crashed
	// between publishing and marking would.
	var ev struct {
		Payload json.RawMessage
	}
	if err := pool.QueryRow(ctx, "SELECT payload FROM shop_outbox WHERE event_id = $1", body.EventID).Scan(&ev.Payload); err != nil {
		t.Fatal(err)
	}
	sync, err := sarama.NewSyncProducer(brokers, shop.ProducerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer sync.Close()
	for range 2 {
		msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("cart-7"), Value: sarama.ByteEncoder(ev.Payload),
			Headers: []sarama.RecordHeader{
				{Key: []byte("ce_specversion"), Value: []byte("1.0")},
				{Key: []byte("ce_id"), Value: []byte(body.EventID)},
				{Key: []byte("ce_source"), Value: []byte("/shop/carts")},
				{Key: []byte("ce_type"), Value: []byte(shop.TypeCartCheckedOut)},
				{Key: []byte("ce_subject"), Value: []byte("cart-7")},
				{Key: []byte("ce_sequence"), Value: []byte("1")},
				{Key: []byte("content-type"), Value: []byte("application/json")},
			}}
		if _, _, err := sync.SendMessage(msg); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "both duplicates seen", func() bool { return runner.Counts().Duplicates >= 2 })
	if got := count(t, pool, "SELECT count(*) FROM shipments WHERE cart_id = 'cart-7'"); got != 1 {
		t.Errorf("%d shipments of cart-7, want 1", got)
	}
	if got := count(t, pool, "SELECT count(*) FROM shop_inbox WHERE event_id = $1 AND status = 'processed'", body.EventID); got != 1 {
		t.Errorf("%d processed rows of the event in shop_inbox, want 1", got)
	}
	// The default names were never used.
	if got := count(t, pool, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename IN ('outbox', 'inbox', 'inbox_sequences')"); got != 0 {
		t.Errorf("%d tables under the default names, want 0", got)
	}
}
