package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/outbox"
)

// Watermill, the contender a Go user would pick instead of pkg/outbox: its
// transactional publisher (forwarder.NewPublisher over watermill-sql's
// PostgreSQL publisher, in the caller's transaction) and its Forwarder (SQL
// subscriber → watermill-kafka publisher). It runs as watermill-peer, built
// from internal/lab/peers/watermill, a module of its own so Watermill never
// enters paylab's go.mod; it reads the same payload file as every contender
// and measures on the run's own databases and topics.

// watermillPeerDir is the peer's module, inside the repository.
const watermillPeerDir = "internal/lab/peers/watermill"

// buildWatermillPeer builds watermill-peer from the checkout at repo into
// outDir and returns the binary's path.
func buildWatermillPeer(ctx context.Context, repo, outDir string) (string, error) {
	out, err := filepath.Abs(outDir)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(out, "watermill-peer")
	cmd := exec.CommandContext(ctx, "go", "build", "-C", filepath.Join(repo, watermillPeerDir), "-o", bin, ".")
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=auto")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building watermill-peer: %w\n%s", err, msg)
	}
	return bin, nil
}

// runPeer runs a peer's subcommand (args[0]), its stderr into the log
// named name, and decodes the one JSON object it prints into result. The
// peer is asked to stop with SIGTERM when ctx ends.
func (e *env) runPeer(ctx context.Context, bin, name string, result any, args ...string) error {
	log, err := e.logFile(name)
	if err != nil {
		return err
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, log
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s (log: %s): %w", filepath.Base(bin), args[0], log.Name(), err)
	}
	if err := json.Unmarshal(stdout.Bytes(), result); err != nil {
		return fmt.Errorf("%s %s printed %q: %w", filepath.Base(bin), args[0], stdout.String(), err)
	}
	return nil
}

// watermillCaptured is what `watermill-peer capture` prints.
type watermillCaptured struct {
	Workers      int     `json:"workers"`
	Transactions int     `json:"transactions"`
	Seconds      float64 `json:"seconds"`
	PerSecond    float64 `json:"per_second"`
	P50          Millis  `json:"p50_ms"`
	P99          Millis  `json:"p99_ms"`
	Max          Millis  `json:"max_ms"`
	Errors       int     `json:"errors"`
	FirstError   string  `json:"first_error"`
}

// watermillCapture is B1's closed loop with Watermill's transactional
// publisher: workers connections to the database at dbURL, each transaction
// updateSQL on an order id (from idsSQL, round-robin, no two workers sharing
// one) and one message about the order, with s's warmup, window and minimum.
func (e *env) watermillCapture(ctx context.Context, bin, dbURL string, workers int, s Sizes, updateSQL, idsSQL, payloadFile string) (CaptureResult, error) {
	res := CaptureResult{Concurrency: workers}
	var out watermillCaptured
	err := e.runPeer(ctx, bin, fmt.Sprintf("watermill-capture-c%d-%s", workers, randomHex(3)), &out, "capture",
		"-db", dbURL, "-workers", strconv.Itoa(workers), "-warmup", s.Warmup.String(), "-duration", s.CaptureDuration.String(),
		"-min-ops", strconv.Itoa(s.MinOps), "-update-sql", updateSQL, "-ids-sql", idsSQL, "-payload-file", payloadFile,
		"-topic", "order-events")
	if err != nil {
		return res, err
	}
	res.Completed, res.Errors, res.FirstError, res.PerSecond = out.Transactions, out.Errors, out.FirstError, out.PerSecond
	res.Latency = Latency{N: out.Transactions, P50: out.P50, P99: out.P99, Max: out.Max}
	if out.Transactions == 0 {
		return res, fmt.Errorf("watermill: no capture completed at concurrency %d: %s", workers, out.FirstError)
	}
	return res, nil
}

// watermillDrained is what `watermill-peer drain` prints.
type watermillDrained struct {
	Events     int     `json:"events"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"per_second"`
	CPUSeconds float64 `json:"cpu_seconds"`
	Records    int64   `json:"records"`
}

// watermillDrain is S2 for Watermill: a fresh database and topic, a backlog
// of n messages written perTx per transaction through Watermill's
// transactional publisher, then one Forwarder timed from its start until
// the topic holds the n records. pg_stat_database counts the database's
// transactions over the drain, as for the relays; CPU has PostgreSQL's and
// the broker's over the peer's run and the peer's own over the drain
// (PeerCPUSeconds, also there when the servers run elsewhere).
func (e *env) watermillDrain(ctx context.Context, bin string, n, perTx int, payloadFile string) (DrainResult, error) {
	res := DrainResult{Relays: 1, Events: n}
	stage := "pw" + randomHex(3)
	dbURL, topic, err := e.databaseAndTopic(ctx, stage)
	if err != nil {
		return res, err
	}
	var seeded struct {
		Events int `json:"events"`
	}
	if err := e.runPeer(ctx, bin, "watermill-"+stage+"-seed", &seeded, "seed", "-db", dbURL, "-n", strconv.Itoa(n),
		"-per-tx", strconv.Itoa(perTx), "-payload-file", payloadFile, "-topic", topic); err != nil {
		return res, err
	}
	if seeded.Events != n {
		return res, fmt.Errorf("watermill: seeded %d messages of %d", seeded.Events, n)
	}
	if err := e.checkpoint(ctx); err != nil {
		return res, err
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	before, err := serverTransactions(ctx, conn)
	if err != nil {
		return res, err
	}
	// A deadline, not a window: far longer than the slowest drain seen.
	timeout := 5*time.Minute + time.Duration(n)*20*time.Millisecond
	var out watermillDrained
	cpu := sampleCPU()
	if err := e.runPeer(ctx, bin, "watermill-"+stage+"-drain", &out, "drain", "-db", dbURL,
		"-brokers", strings.Join(e.cfg.Brokers, ","), "-topic", topic, "-n", strconv.Itoa(n), "-timeout", timeout.String()); err != nil {
		return res, err
	}
	// The servers' CPU over the peer's life (its start and stop included,
	// a few milliseconds); the contender's is the peer's own over the drain.
	peerCPU := time.Duration(out.CPUSeconds * float64(time.Second))
	res.CPU = cpu.perEvent(sampleCPU(), n, max(peerCPU, time.Nanosecond))
	after, err := serverTransactions(ctx, conn)
	if err != nil {
		return res, err
	}
	if out.Records != int64(n) && e.cfg.Log != nil {
		fmt.Fprintf(e.cfg.Log, "bench: watermill sent %d records for %d messages\n", out.Records, n)
	}
	res.Seconds, res.PerSecond, res.PeerCPUSeconds = out.Seconds, out.PerSecond, out.CPUSeconds
	res.Statements.ServerTransactions = after - before
	return res, nil
}

// payloadOrder is the seed's (seed.go) row 42, the event writePayloadFile
// writes.
const payloadOrder = 42

// writePayloadFile writes the event every contender sends, to path:
// {"value": …, "headers": {…}}. The value is an OrderCaptured payload as
// the seed writes it (seedRows' row 42) and as the relay sends it, the
// outbox's jsonb as PostgreSQL prints it (keys by length, ", " and ": ");
// the headers are those pkg/outbox's KafkaPublisher sets — the CloudEvents
// attributes and traceparent — for that event. The value is written
// verbatim so the peers can send its bytes as they are.
func writePayloadFile(path string) error {
	const i, tag = payloadOrder, "a1b2c3"
	at := time.Now().UTC().Truncate(time.Microsecond)
	ms := fmt.Sprintf("%012x", at.UnixMilli())
	ms = ms[:8] + "-" + ms[8:]
	orderID := fmt.Sprintf("%s-7%s-9%s-%012x", ms, tag[:3], tag[3:], i)
	value := fmt.Sprintf(`{"amount": %d, "currency": %q, "order_id": %q, "sequence": 1, "captured_at": %q, `+
		`"customer_id": "cus_%d", "merchant_id": "mer_%d", "schema_version": 1}`,
		100+(i*7919)%49900, []string{"EUR", "USD", "GBP", "JPY"}[i%4], orderID,
		at.Format("2006-01-02T15:04:05.999999-07:00"), i%1000, i%50)
	ev := outbox.Event{
		ID:            uuid.MustParse(fmt.Sprintf("%s-7%s-8%s-%012x", ms, tag[:3], tag[3:], i)),
		AggregateType: "order", AggregateID: orderID, Type: "OrderCaptured", SchemaVersion: 1, Sequence: 1,
		Payload: []byte(value), OccurredAt: at,
		Headers: map[string]string{"traceparent": fmt.Sprintf("00-%032x-%016x-01", i, i)},
	}
	msg := ev.ProducerMessage("/paylab/orders")
	headers := make(map[string]string, len(msg.Headers))
	for _, h := range msg.Headers {
		headers[string(h.Key)] = string(h.Value)
	}
	h, err := json.Marshal(headers)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(`{"value": `+value+`, "headers": `+string(h)+"}\n"), 0o644)
}
