package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// The payload file holds the event as the relay sends it: the value is the
// outbox's jsonb text, byte for byte, and the headers are the eleven that
// pkg/outbox's KafkaPublisher sets.
func TestPayloadFileIsTheRelaysEvent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "payload.json")
	if err := writePayloadFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Value   json.RawMessage   `json:"value"`
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var ev struct {
		OrderID  string `json:"order_id"`
		Sequence int    `json:"sequence"`
	}
	if err := json.Unmarshal(f.Value, &ev); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Value); n < 200 || n > 240 {
		t.Errorf("value of %d bytes: %s", n, f.Value)
	}
	want := []string{outbox.HeaderSpecVersion, outbox.HeaderID, outbox.HeaderSource, outbox.HeaderType, outbox.HeaderTime,
		outbox.HeaderSubject, outbox.HeaderSequence, outbox.HeaderSchemaVersion, outbox.HeaderAggregateType,
		outbox.HeaderContentType, "traceparent"}
	if len(f.Headers) != len(want) {
		t.Errorf("headers %v, want %v", f.Headers, want)
	}
	for _, h := range want {
		if f.Headers[h] == "" {
			t.Errorf("no header %s in %v", h, f.Headers)
		}
	}
	if f.Headers[outbox.HeaderSubject] != ev.OrderID || f.Headers[outbox.HeaderSequence] != "1" || ev.Sequence != 1 {
		t.Errorf("headers %v for event %s", f.Headers, f.Value)
	}
	if testing.Short() || os.Getenv("PAYLAB_ADMIN_DATABASE_URL") == "" {
		return
	}
	// PostgreSQL prints the value as it is: it is jsonb's own text.
	conn, err := pgx.Connect(testenv.Context(t), testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(testenv.Context(t))
	var printed string
	if err := conn.QueryRow(testenv.Context(t), `SELECT $1::jsonb::text`, string(f.Value)).Scan(&printed); err != nil {
		t.Fatal(err)
	}
	if printed != string(f.Value) {
		t.Errorf("value\n%s\nPostgreSQL prints it\n%s", f.Value, printed)
	}
}

// watermillEnv is a run's env on the local stack, closed at cleanup.
func watermillEnv(t *testing.T) (*env, string, string) {
	t.Helper()
	if os.Getenv("PAYLAB_ADMIN_DATABASE_URL") == "" {
		t.Skip("PAYLAB_ADMIN_DATABASE_URL is unset: start the stack and eval \"$(scripts/stack.sh env)\" to run the Watermill peer")
	}
	ctx := testenv.Context(t)
	repo, err := localstack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, err := buildWatermillPeer(ctx, repo, dir)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	e, err := newEnv(ctx, Config{AdminURL: testenv.AdminURL(), Brokers: testenv.Brokers(), LogDir: filepath.Join(dir, "logs"), Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.close(); err != nil {
			t.Error(err)
		}
		if !t.Failed() {
			return
		}
		t.Logf("bench log:\n%s", log.String())
		logs, _ := filepath.Glob(filepath.Join(e.cfg.LogDir, "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", filepath.Base(l), b)
		}
	})
	payload := filepath.Join(dir, "payload.json")
	if err := writePayloadFile(payload); err != nil {
		t.Fatal(err)
	}
	return e, bin, payload
}

// The peer, built from the checkout, drains a backlog into a topic of the
// run and captures orders of a database of the run.
func TestWatermillPeerDrainsAndCaptures(t *testing.T) {
	t.Parallel()
	e, bin, payload := watermillEnv(t)
	ctx := testenv.Context(t)

	const n = 500
	d, err := e.watermillDrain(ctx, bin, n, 100, payload)
	if err != nil {
		t.Fatal(err)
	}
	if d.Relays != 1 || d.Events != n || d.Seconds <= 0 || d.PerSecond <= 0 || d.PeerCPUSeconds <= 0 || d.Statements.ServerTransactions <= 0 {
		t.Errorf("drain: %+v", d)
	}
	if d.CPU != nil && math.Abs(d.CPU.Contender-d.PeerCPUSeconds*1e6/n) > 0.01 {
		t.Errorf("contender CPU %.1f µs per event, the peer measured %.2f s for %d", d.CPU.Contender, d.PeerCPUSeconds, n)
	}
	t.Logf("drain of %d: %.0f events/s, %.2f s of the peer's CPU; %+v", n, d.PerSecond, d.PeerCPUSeconds, d.CPU)

	dbURL, err := e.database(ctx, "pwcap", "orders")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status, captured_amount)
		SELECT gen_random_uuid(), 'cus_' || i, 'mer_' || i % 50, 1999, 'EUR', 'captured', 1999 FROM generate_series(1, 64) AS i`); err != nil {
		t.Fatal(err)
	}
	const workers = 4
	s := Sizes{Warmup: 200 * time.Millisecond, CaptureDuration: time.Second, MinOps: 20}
	c, err := e.watermillCapture(ctx, bin, dbURL, workers, s,
		`UPDATE orders SET event_seq = event_seq + 1, version = version + 1, updated_at = now() WHERE id = $1`,
		`SELECT id FROM orders ORDER BY id`, payload)
	if err != nil {
		t.Fatal(err)
	}
	if c.Concurrency != workers || c.Completed < s.MinOps || c.Errors != 0 || c.PerSecond <= 0 || c.Latency.N != c.Completed {
		t.Errorf("capture: %+v", c)
	}
	t.Logf("capture at %d workers: %.0f tx/s, p50 %.1f ms", workers, c.PerSecond, c.Latency.P50)
	// Every committed transaction updated an order and wrote its message.
	var updates, messages int
	if err := conn.QueryRow(ctx, `SELECT (SELECT sum(event_seq) FROM orders),
		(SELECT count(*) FROM watermill_paylab_forwarder)`).Scan(&updates, &messages); err != nil {
		t.Fatal(err)
	}
	if updates < c.Completed || messages != updates {
		t.Errorf("%d captures measured, %d updates, %d messages in Watermill's table", c.Completed, updates, messages)
	}
}
