// Package consumertest runs a consumer service (see consumersvc) in tests:
// its own database and topics, a producer that publishes as the relay does,
// the service in process, or the test binary re-run as the service so a
// test can crash it for real.
package consumertest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/consumersvc"
	"github.com/paylab/paylab/internal/platform/process"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// A consumer's crash tests re-run the test binary as the consumer: the
// marker variable makes Main run the service instead of the tests.
const (
	childVar   = "PAYLAB_TEST_CONSUMER_CHILD"
	crashAtVar = "PAYLAB_TEST_CRASH_AT"
	// CrashCode is the exit code of a child that reached its crash point.
	CrashCode = 42
)

// ConsumerConfig is a consumer's shared configuration for a test: the given
// database, topics and group on the stack's Kafka, admin on a free port,
// three attempts before dead-lettering.
func Config(dbURL, topic, dlq, group string, inboxEnabled bool) consumersvc.Config {
	return consumersvc.Config{
		DatabaseURL: dbURL, KafkaBrokers: strings.Join(testenv.Brokers(), ","),
		OrdersTopic: topic, DeadLetterTopic: dlq, ConsumerGroup: group, AdminAddr: "127.0.0.1:0",
		InboxEnabled: inboxEnabled, InboxRetention: time.Hour, InboxMaxAttempts: 3,
	}
}

// Main is the TestMain of a consumer service's tests. Started by
// StartChild, the binary runs serve — with a fault hook that exits
// at once with CrashCode (no deferred cleanup, no offset commit) at the
// point named by the test — and exits; otherwise it runs the tests and
// checks that no goroutine leaked.
func Main(m *testing.M, serve func(ctx context.Context, fault consumersvc.FaultFunc) error) {
	if os.Getenv(childVar) != "1" {
		goleak.VerifyTestMain(m,
			goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
			goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		)
		return
	}
	ctx, stop := process.SignalContext()
	crashAt := os.Getenv(crashAtVar)
	err := serve(ctx, func(_ context.Context, point string) error {
		if point == crashAt {
			os.Exit(CrashCode)
		}
		return nil
	})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// StartChild runs the test binary as the consumer named name (see
// Main) with cfg's shared settings, env for its own, and a
// crash at the point crashAt ("" for none).
func StartChild(t testing.TB, name string, cfg consumersvc.Config, crashAt string, env ...string) *testenv.Child {
	t.Helper()
	return testenv.StartChild(t, name, append([]string{
		childVar + "=1", crashAtVar + "=" + crashAt,
		"DATABASE_URL=" + cfg.DatabaseURL, "KAFKA_BROKERS=" + cfg.KafkaBrokers,
		"ORDERS_TOPIC=" + cfg.OrdersTopic, "DEAD_LETTER_TOPIC=" + cfg.DeadLetterTopic,
		"CONSUMER_GROUP=" + cfg.ConsumerGroup, "INBOX_ENABLED=" + strconv.FormatBool(cfg.InboxEnabled),
	}, env...)...)
}

// Fixture is one consumer's world for a test: its own database
// (migrated for the service), its own orders and dead-letter topics, and a
// producer that publishes events exactly as the relay does.
type Fixture struct {
	T     *testing.T
	Pool  *pgxpool.Pool
	DBURL string
	Topic string
	DLQ   string
	Prod  sarama.SyncProducer // publishes to any topic as the relay does
}

// NewFixture creates the database of the service named service and
// an orders topic with the given partitions.
func NewFixture(t *testing.T, service string, partitions int32) *Fixture {
	t.Helper()
	pool, dbURL := testenv.NewPool(t, service)
	prod, err := sarama.NewSyncProducer(testenv.Brokers(), broker.ProducerConfig("paylab-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	return &Fixture{T: t, Pool: pool, DBURL: dbURL, Topic: testenv.NewTopic(t, partitions), DLQ: testenv.NewTopic(t, 1), Prod: prod}
}

// Config is the fixture's shared consumer configuration (see ConsumerConfig).
func (f *Fixture) Config(group string, inboxEnabled bool) consumersvc.Config {
	return Config(f.DBURL, f.Topic, f.DLQ, group+"-"+f.Topic, inboxEnabled)
}

// Publish sends events to the fixture's topic exactly as the relay does.
func (f *Fixture) Publish(events ...*outbox.Event) {
	f.T.Helper()
	for _, e := range events {
		e.Topic = f.Topic
		if _, _, err := f.Prod.SendMessage(e.ProducerMessage("/paylab/orders")); err != nil {
			f.T.Fatal(err)
		}
	}
}

// Count runs a count(*) query on the fixture's database.
func (f *Fixture) Count(query string, args ...any) int {
	f.T.Helper()
	var n int
	if err := f.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		f.T.Fatal(err)
	}
	return n
}

// Run runs s in this process, its admin routes on a free port and each
// extra server, until the test ends; it returns the admin base URL.
func (f *Fixture) Run(s *consumersvc.Service, extra ...consumersvc.Server) string {
	f.T.Helper()
	adminLn := testenv.Listen(f.T)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, adminLn, extra...) }()
	f.T.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.T.Errorf("%s: %v", s.Spec.Name, err)
		}
		s.Close()
	})
	return "http://" + adminLn.Addr().String()
}
