package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/paylab/paylab/internal/broker"
	"github.com/paylab/paylab/internal/testenv"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/notifications/internal/receipt"
)

// childEnv makes the test binary run the notifications service instead of
// the tests, so a test can crash a real consumer process and restart it.
const (
	childEnv   = "PAYLAB_NOTIFICATIONS_CHILD"
	crashAtEnv = "PAYLAB_NOTIFICATIONS_CRASH_AT"
	crashCode  = 42
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

// runChild runs the service configured from the environment, with a fault
// hook that exits at once at the named point.
func runChild() int {
	ctx, stop := signalContext()
	defer stop()
	cfg, err := loadConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	crashAt := os.Getenv(crashAtEnv)
	fault := func(_ context.Context, point string) {
		if point == crashAt {
			os.Exit(crashCode)
		}
	}
	if err := serve(ctx, cfg, slog.New(slog.NewJSONHandler(os.Stderr, nil)), fault); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type fixture struct {
	t       *testing.T
	pool    *pgxpool.Pool
	dbURL   string
	topic   string
	dlq     string
	mailpit *testenv.Mailpit
	prod    sarama.SyncProducer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool, dbURL := testenv.NewPool(t, "notifications")
	f := &fixture{t: t, pool: pool, dbURL: dbURL, topic: testenv.NewTopic(t, 3), dlq: testenv.NewTopic(t, 1),
		mailpit: testenv.StartMailpit(t)}
	prod, err := sarama.NewSyncProducer(testenv.Brokers(), broker.ProducerConfig("paylab-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	f.prod = prod
	return f
}

func (f *fixture) config(inboxEnabled bool) config {
	return config{
		DatabaseURL: f.dbURL, KafkaBrokers: strings.Join(testenv.Brokers(), ","),
		OrdersTopic: f.topic, DeadLetterTopic: f.dlq, ConsumerGroup: "notifications-" + f.topic,
		AdminAddr: "127.0.0.1:0", SMTPAddr: f.mailpit.SMTPAddr, SMTPTimeout: 10 * time.Second,
		MailFrom: "receipts@paylab.local", InboxEnabled: inboxEnabled, InboxRetention: time.Hour, InboxMaxAttempts: 3,
	}
}

// start runs the service in this process until the test ends.
func (f *fixture) start(cfg config) *app {
	f.t.Helper()
	a, err := newApp(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	adminLn := listen(f.t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx, adminLn) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("notifications: %v", err)
		}
		a.pool.Close()
	})
	return a
}

// mailsFor returns the messages Mailpit holds for an event's receipt.
func (f *fixture) mailsFor(e *outbox.Event) []testenv.MailpitMessage {
	f.t.Helper()
	var out []testenv.MailpitMessage
	for _, m := range f.mailpit.Messages(f.t) {
		if "<"+m.MessageID+">" == receipt.MessageID(e.ID) {
			out = append(out, m)
		}
	}
	return out
}

func (f *fixture) publish(events ...*outbox.Event) {
	f.t.Helper()
	for _, e := range events {
		e.Topic = f.topic
		if _, _, err := f.prod.SendMessage(e.ProducerMessage("/paylab/orders")); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) count(query string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// captured is an OrderCaptured event; notifications does not care which merchant.
func captured(orderID, customer string, amount int64, currency string) *outbox.Event {
	return testenv.OrderCaptured(orderID, customer, "mer_1", amount, currency)
}
