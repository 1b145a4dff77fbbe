package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
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
	"github.com/paylab/paylab/services/ledger/internal/ledgerdb"
)

// childEnv makes the test binary run the ledger instead of the tests, so a
// test can crash a real consumer process and start it again.
const (
	childEnv   = "PAYLAB_LEDGER_CHILD"
	crashAtEnv = "PAYLAB_LEDGER_CRASH_AT"
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

// runChild is the ledger process of the crash tests: configured from the
// environment like the real binary, with a fault hook that exits at once
// (no deferred cleanup, no offset commit) at the named point.
func runChild() int {
	ctx, stop := signalContext()
	defer stop()
	cfg, err := loadConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	crashAt := os.Getenv(crashAtEnv)
	fault := func(_ context.Context, point string) {
		if point == crashAt {
			os.Exit(crashCode)
		}
	}
	if err := serve(ctx, cfg, log, fault); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fixture is one ledger on its own database and topics.
type fixture struct {
	t     *testing.T
	pool  *pgxpool.Pool
	dbURL string
	topic string
	dlq   string
	prod  sarama.SyncProducer
}

func newFixture(t *testing.T, partitions int32) *fixture {
	t.Helper()
	pool, dbURL := testenv.NewPool(t, "ledger")
	f := &fixture{t: t, pool: pool, dbURL: dbURL, topic: testenv.NewTopic(t, partitions), dlq: testenv.NewTopic(t, 1)}
	prod, err := sarama.NewSyncProducer(testenv.Brokers(), broker.ProducerConfig("paylab-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	f.prod = prod
	t.Cleanup(f.checkInvariant)
	return f
}

func (f *fixture) config(inboxEnabled bool) config {
	return config{
		DatabaseURL: f.dbURL, KafkaBrokers: strings.Join(testenv.Brokers(), ","),
		OrdersTopic: f.topic, DeadLetterTopic: f.dlq, ConsumerGroup: "ledger-" + f.topic,
		HTTPAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		InboxEnabled: inboxEnabled, InboxRetention: time.Hour, InboxMaxAttempts: 3, InboxBatchSize: 1,
	}
}

// start runs a ledger in this process until the test ends; it returns the
// app and the base URL of its read API.
func (f *fixture) start(cfg config) (*app, string) {
	a, api, _ := f.startWithAdmin(cfg)
	return a, api
}

// startWithAdmin is start that also returns the admin listener's base URL.
func (f *fixture) startWithAdmin(cfg config) (*app, string, string) {
	f.t.Helper()
	a, err := newApp(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	httpLn, adminLn := listen(f.t), listen(f.t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx, httpLn, adminLn) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Errorf("ledger: %v", err)
		}
		a.pool.Close()
	})
	return a, "http://" + httpLn.Addr().String(), "http://" + adminLn.Addr().String()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// checkInvariant asserts the ledger's invariant: per currency, all postings
// sum to zero.
func (f *fixture) checkInvariant() {
	totals, err := ledgerdb.New(f.pool).PostingTotals(context.Background())
	if err != nil {
		f.t.Errorf("reading posting totals: %v", err)
		return
	}
	for _, tot := range totals {
		if tot.Total != 0 {
			f.t.Errorf("invariant broken: postings in %s sum to %d", tot.Currency, tot.Total)
		}
	}
}

// publish sends events exactly as the relay does.
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

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v: %s", url, err, body)
		}
	}
	return resp.StatusCode
}
