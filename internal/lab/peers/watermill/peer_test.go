package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/jackc/pgx/v5"
)

// These tests run against the local stack's PostgreSQL and Kafka:
//
//	eval "$(scripts/stack.sh env)" && cd internal/lab/peers/watermill && go test ./...

// stack returns the admin URL and the brokers, or skips the test.
func stack(t *testing.T) (adminURL string, brokers []string) {
	t.Helper()
	adminURL = os.Getenv("PAYLAB_ADMIN_DATABASE_URL")
	if adminURL == "" {
		t.Skip("PAYLAB_ADMIN_DATABASE_URL is unset: start the stack and eval \"$(scripts/stack.sh env)\" to run the Watermill peer against it")
	}
	brokers = splitBrokers(os.Getenv("KAFKA_BROKERS"))
	if len(brokers) == 0 {
		t.Skip("KAFKA_BROKERS is unset: eval \"$(scripts/stack.sh env)\" to run the Watermill peer against the stack")
	}
	return adminURL, brokers
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// scratchDatabase creates a database dropped at cleanup and returns a URL
// to it (as the admin role).
func scratchDatabase(t *testing.T, adminURL string) string {
	t.Helper()
	ctx := testContext(t)
	name := "t_watermill_peer_" + randomHex(6)
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("connecting to PostgreSQL: %v", err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("dropping %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// scratchTopic creates a topic of six partitions, deleted at cleanup.
func scratchTopic(t *testing.T, brokers []string) string {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = kafkaVersion
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		t.Fatalf("connecting to Kafka: %v", err)
	}
	name := "t-watermill-peer-" + randomHex(4)
	if err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: 6, ReplicationFactor: 1}, false); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := admin.DeleteTopic(name); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			t.Errorf("deleting topic %s: %v", name, err)
		}
		admin.Close()
	})
	return name
}

// testValue is an OrderCaptured event as paylab's relay sends it: the
// outbox's jsonb, as PostgreSQL writes it.
const testValue = `{"amount": 1999, "currency": "EUR", "order_id": "0193a1b2-0001-7000-8000-00000000002a", "sequence": 1, ` +
	`"captured_at": "2026-12-02T12:00:00.123456+00:00", "customer_id": "cus_42", "merchant_id": "mer_7", "schema_version": 1}`

// testPayload is testValue with the headers paylab's relay sets.
func testPayload(t *testing.T) payload {
	t.Helper()
	file := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(file, []byte(`{
  "value": `+testValue+`,
  "headers": {"ce_specversion": "1.0", "ce_id": "0193a1b2-0000-7000-8000-00000000002a", "ce_source": "/paylab/orders",
              "ce_type": "OrderCaptured", "ce_time": "2026-12-02T12:00:00.123456Z", "ce_subject": "0193a1b2-0001-7000-8000-00000000002a",
              "ce_sequence": "1", "ce_schemaversion": "1", "ce_aggregatetype": "order", "content-type": "application/json",
              "traceparent": "00-0000000000000000000000000000002a-000000000000002a-01"}
}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := readPayload(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Value) != testValue || len(p.Headers) != 11 {
		t.Fatalf("payload file read as %s, %d headers", p.Value, len(p.Headers))
	}
	return p
}

// The seed's 300 messages, 100 per transaction, all reach the topic once,
// keyed by their order ids, with the payload's value and headers.
func TestSeedThenDrainDeliversEveryMessageOnce(t *testing.T) {
	t.Parallel()
	adminURL, brokers := stack(t)
	ctx, log := testContext(t), testLogger(t)
	db, topic, p := scratchDatabase(t, adminURL), scratchTopic(t, brokers), testPayload(t)

	const n = 300
	s, err := seed(ctx, log, seedConfig{DB: db, N: n, PerTx: 100, Payload: p, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	if s.Events != n {
		t.Fatalf("seeded %d, want %d", s.Events, n)
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// The keys the seed gave, read back from Watermill's envelopes, and the
	// transactions they were written in.
	var keys []string
	var txs int
	if err := conn.QueryRow(ctx, `SELECT array_agg(payload->'metadata'->>'ce_subject'), count(DISTINCT transaction_id)
		FROM watermill_paylab_forwarder`).Scan(&keys, &txs); err != nil {
		t.Fatal(err)
	}
	if len(keys) != n || txs != n/100 {
		t.Fatalf("Watermill's table holds %d messages in %d transactions, want %d in %d", len(keys), txs, n, n/100)
	}

	d, err := drain(ctx, log, drainConfig{DB: db, Brokers: brokers, Topic: topic, N: n, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if d.Events != n || d.Records != n {
		t.Errorf("drain: %+v, want %d events and records", d, n)
	}

	records := readTopic(t, brokers, topic)
	if len(records) != n {
		t.Fatalf("the topic holds %d records, want %d", len(records), n)
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	seen := map[string]bool{}
	for _, r := range records {
		key := string(r.Key)
		headers := map[string]string{}
		for _, h := range r.Headers {
			headers[string(h.Key)] = string(h.Value)
		}
		switch {
		case !want[key]:
			t.Fatalf("record with key %q, which the seed did not write", key)
		case seen[key]:
			t.Fatalf("key %s twice", key)
		case string(r.Value) != testValue:
			t.Fatalf("value %s, want %s", r.Value, testValue)
		case headers[headerSubject] != key:
			t.Fatalf("%s = %q, want the key %s", headerSubject, headers[headerSubject], key)
		case headers[headerID] == "" || headers[headerID] != headers[kafka.UUIDHeaderKey]:
			t.Fatalf("%s = %q, want the message's UUID %q", headerID, headers[headerID], headers[kafka.UUIDHeaderKey])
		case len(headers) != len(p.Headers)+1: // Watermill adds its UUID
			t.Fatalf("headers %v, want the payload's %d and %s", headers, len(p.Headers), kafka.UUIDHeaderKey)
		}
		for k, v := range p.Headers {
			if k != headerID && k != headerSubject && headers[k] != v {
				t.Fatalf("header %s = %q, want %q", k, headers[k], v)
			}
		}
		seen[key] = true
	}
}

// readTopic reads every record of topic's partitions.
func readTopic(t *testing.T, brokers []string, topic string) []*sarama.ConsumerMessage {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = kafkaVersion
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	partitions, err := client.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []*sarama.ConsumerMessage
	for _, p := range partitions {
		newest, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		if newest == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for next := int64(0); next < newest; {
			select {
			case m := <-pc.Messages():
				out = append(out, m)
				next = m.Offset + 1
			case <-time.After(30 * time.Second):
				t.Fatalf("partition %d: no record after offset %d within 30 s", p, next)
			}
		}
		pc.Close()
	}
	return out
}

// A short capture commits transactions, each with its order's update and
// its message in Watermill's table: as many messages as updates.
func TestCaptureWritesUpdateAndMessageTogether(t *testing.T) {
	t.Parallel()
	adminURL, _ := stack(t)
	ctx, log := testContext(t), testLogger(t)
	db := scratchDatabase(t, adminURL)
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE orders (id uuid PRIMARY KEY, captures bigint NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO orders (id) SELECT gen_random_uuid() FROM generate_series(1, 20)`); err != nil {
		t.Fatal(err)
	}
	const workers = 4
	res, err := capture(ctx, log, captureConfig{
		DB: db, Workers: workers, Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond, MinOps: 10,
		UpdateSQL: `UPDATE orders SET captures = captures + 1, updated_at = now() WHERE id = $1`,
		IDsSQL:    `SELECT id FROM orders ORDER BY id`,
		Payload:   testPayload(t), Topic: "order-events",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Workers != workers || res.Transactions < 10 || res.Committed < res.Transactions || res.Errors != 0 {
		t.Fatalf("capture: %+v", res)
	}
	var updates, messages, strangers int
	if err := conn.QueryRow(ctx, `SELECT (SELECT sum(captures) FROM orders), (SELECT count(*) FROM watermill_paylab_forwarder),
		(SELECT count(*) FROM watermill_paylab_forwarder w WHERE NOT EXISTS
			(SELECT 1 FROM orders o WHERE o.id::text = w.payload->'metadata'->>'ce_subject')
			OR w.payload->>'destination_topic' <> 'order-events')`).Scan(&updates, &messages, &strangers); err != nil {
		t.Fatal(err)
	}
	if updates != res.Committed || messages != res.Committed || strangers != 0 {
		t.Errorf("%d transactions committed, %d updates, %d messages in Watermill's table (%d not about an order of the table or for another topic)",
			res.Committed, updates, messages, strangers)
	}
	// Worker w takes the ids w, w+4, w+8, … of the query's order, round and
	// round: within a worker's ids the counts differ by one at most.
	var uneven int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT worker FROM (
		SELECT (row_number() OVER (ORDER BY id) - 1) % $1 AS worker, captures FROM orders) AS o
		GROUP BY worker HAVING max(captures) - min(captures) > 1) AS w`, workers).Scan(&uneven); err != nil {
		t.Fatal(err)
	}
	if uneven != 0 {
		t.Errorf("%d workers did not go round their ids", uneven)
	}
}
