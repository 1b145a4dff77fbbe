package relaycmd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/orders/internal/relaycmd"
)

const childEnv = "RELAYCMD_TEST_CHILD"

// TestMain runs relaycmd.Run instead of the tests when childEnv is set, so
// tests can start, crash and kill real relay processes.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
		err := relaycmd.Run(ctx, log)
		stop()
		if err != nil {
			log.Error("relay failed", "error", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	cfg, err := relaycmd.LoadConfig(map[string]string{})
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if cfg.AdminAddr != "127.0.0.1:9081" || cfg.ChaosEnabled || cfg.Mode != relaycmd.ModePoll || !cfg.LeaseFencing || cfg.DeleteDispatched {
		t.Fatalf("defaults = %+v", cfg)
	}
	// The relay's settings map onto the library's config, unset ones left
	// to its defaults (one source: RELAY_BATCH_SIZE unset is 2000 when
	// polling and 5000 when streaming).
	cfg, err = relaycmd.LoadConfig(map[string]string{"RELAY_MODE": "wal", "RELAY_MAX_ATTEMPTS": "-1",
		"OUTBOX_RETENTION": "-1s", "RELAY_LEASE_TTL": "12s", "RELAY_SLOT": "s1", "RELAY_LEASE_FENCING": "false", "RELAY_STANDBY_GUARD": "on",
		"RELAY_DELETE_DISPATCHED": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.WALConfig(nil); w.BatchSize != 0 || w.MaxAttempts != -1 || w.Retention != -time.Second ||
		w.LeaseTTL != 12*time.Second || w.Slot != "s1" || w.StandbyGuard != outbox.StandbyGuardOn {
		t.Errorf("WAL config %+v", w)
	}
	if r := cfg.RelayConfig(nil); !r.Unsafe.UnfencedComplete || r.LeaseTTL != 12*time.Second || !r.DeleteDispatched {
		t.Errorf("relay config %+v", r)
	}
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"batch size", map[string]string{"RELAY_BATCH_SIZE": "-1"}, "RELAY_BATCH_SIZE=-1: batch size -1"},
		{"batch size wal", map[string]string{"RELAY_MODE": "wal", "RELAY_BATCH_SIZE": "20000"}, "RELAY_BATCH_SIZE"},
		{"ttl", map[string]string{"RELAY_LEASE_TTL": "50ms"}, "RELAY_LEASE_TTL"},
		{"backoffs", map[string]string{"RELAY_RETRY_BACKOFF": "2s", "RELAY_RETRY_MAX_BACKOFF": "1s"}, "RELAY_RETRY_MAX_BACKOFF=1s"},
		{"wait below ttl", map[string]string{"RELAY_LEASE_TTL": "1m", "RELAY_STATS_INTERVAL": "-1s"}, "RELAY_STATS_INTERVAL"},
		{"admin addr", map[string]string{"ADMIN_ADDR": "nope"}, "ADMIN_ADDR"},
		{"chaos without token", map[string]string{"CHAOS_ENABLED": "true"}, "CHAOS_TOKEN"},
		{"not a duration", map[string]string{"RELAY_LEASE_TTL": "soon"}, "RELAY_LEASE_TTL"},
		{"mode", map[string]string{"RELAY_MODE": "cdc"}, "RELAY_MODE"},
		{"slot", map[string]string{"RELAY_MODE": "wal", "RELAY_SLOT": "Not-A-Slot"}, "RELAY_SLOT"},
		{"standby guard", map[string]string{"RELAY_MODE": "wal", "RELAY_STANDBY_GUARD": "sometimes"}, "RELAY_STANDBY_GUARD=sometimes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := relaycmd.LoadConfig(tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

type child struct {
	cmd   *exec.Cmd
	admin string
	done  chan struct{}
	err   error
	out   *strings.Builder
}

// startChild starts a relay process and waits until it is ready.
func startChild(t *testing.T, dbURL string, extra ...string) *child {
	t.Helper()
	c := launchChild(t, dbURL, extra...)
	c.waitReady(t)
	return c
}

// launchChild starts a relay process. Its output may be read once it has
// exited.
func launchChild(t *testing.T, dbURL string, extra ...string) *child {
	t.Helper()
	c := &child{admin: testenv.ClosedAddr(t), done: make(chan struct{}), out: &strings.Builder{}}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), childEnv+"=1", "DATABASE_URL="+dbURL,
		"KAFKA_BROKERS="+strings.Join(testenv.Brokers(), ","), "ADMIN_ADDR="+c.admin,
		"RELAY_LEASE_TTL=2s", "RELAY_POLL_INTERVAL=200ms")
	c.cmd.Env = append(c.cmd.Env, extra...)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("relay process output:\n%s", c.out.String())
		}
	})
	return c
}

// waitReady waits until /readyz answers 200: both dependencies answer and
// the relay runs.
func (c *child) waitReady(t *testing.T) {
	t.Helper()
	c.waitReadyz(t, http.StatusOK)
}

// waitReadyz waits until /readyz answers want.
func (c *child) waitReadyz(t *testing.T, want int) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("the relay process's /readyz to answer %d", want), func() bool {
		code, _ := c.call(t, "GET", "/readyz", "", "")
		return code == want
	})
}

func (c *child) call(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+c.admin+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// exitCode waits for the process to exit and returns its status.
func (c *child) exitCode(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		t.Fatalf("relay process still running after %v", timeout)
	}
	var exitErr *exec.ExitError
	if errors.As(c.err, &exitErr) {
		return exitErr.ExitCode()
	}
	if c.err != nil {
		t.Fatal(c.err)
	}
	return 0
}

// The relay process end to end: ready with database and Kafka, metrics
// served, chaos routes token-protected; a fault armed over the admin API
// crashes it after the publish and before the mark; a second process takes
// the event over once the lease expires and stops cleanly on SIGTERM; the
// kill action exits at once; without CHAOS_ENABLED the routes do not exist.
func TestRelayProcess(t *testing.T) {
	t.Parallel()
	const token = "test-token-0123456789"
	pool, dbURL := testenv.NewPool(t, "orders")
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)

	first := startChild(t, dbURL, "RELAY_ID=first", "CHAOS_ENABLED=true", "CHAOS_TOKEN="+token)
	if code, body := first.call(t, "GET", "/metrics", "", ""); code != 200 || !strings.Contains(body, "paylab_outbox_pending") {
		t.Fatalf("/metrics = %d, without paylab_outbox_pending", code)
	}
	if code, _ := first.call(t, "GET", "/chaos/faults", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("chaos without token = %d, want 401", code)
	}
	if code, _ := first.call(t, "GET", "/chaos/faults", "wrong-token-0123456789", ""); code != http.StatusUnauthorized {
		t.Fatalf("chaos with a wrong token = %d, want 401", code)
	}
	code, body := first.call(t, "PUT", "/chaos/faults/relay.after_publish_before_mark", token, `{"action":"crash","count":1}`)
	if code != http.StatusOK {
		t.Fatalf("arming = %d %s", code, body)
	}
	e := outbox.Event{AggregateType: "order", AggregateID: "order-1", Type: "OrderCaptured", Sequence: 1,
		Topic: topic, Payload: json.RawMessage(`{"order_id":"order-1"}`)}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, e) }); err != nil {
		t.Fatal(err)
	}
	if code := first.exitCode(t, 20*time.Second); code != chaos.ExitCode {
		t.Fatalf("first relay exit status %d, want %d", code, chaos.ExitCode)
	}
	var owner string
	if err := pool.QueryRow(ctx, "SELECT lease_owner FROM outbox WHERE dispatched_at IS NULL").Scan(&owner); err != nil || owner != "first" {
		t.Fatalf("after the crash: lease owner %q (%v), want the dead relay", owner, err)
	}

	second := startChild(t, dbURL, "RELAY_ID=second")
	if code, _ := second.call(t, "GET", "/chaos/faults", token, ""); code != http.StatusNotFound {
		t.Fatalf("chaos routes without CHAOS_ENABLED = %d, want 404", code)
	}
	testenv.Eventually(t, time.Minute, "the second relay to take the event over", func() bool {
		var pending int
		_ = pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL").Scan(&pending)
		return pending == 0
	})
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := second.exitCode(t, 20*time.Second); code != 0 {
		t.Fatalf("second relay exit status %d after SIGTERM, want 0", code)
	}

	third := startChild(t, dbURL, "RELAY_ID=third", "CHAOS_ENABLED=true", "CHAOS_TOKEN="+token)
	third.call(t, "POST", "/chaos/kill", token, "")
	if code := third.exitCode(t, 10*time.Second); code != chaos.ExitCode {
		t.Fatalf("killed relay exit status %d, want %d", code, chaos.ExitCode)
	}

}

// RELAY_MODE=wal: the process creates its slot and publication, streams
// the outbox's inserts to Kafka (the event is marked dispatched), reports
// itself as the active reader, and stops cleanly on SIGTERM.
func TestRelayProcessWALMode(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	testenv.GrantReplication(t, ctx, "orders")
	pool, dbURL := testenv.NewPool(t, "orders")
	topic := testenv.NewTopic(t, 1)
	slot := walSlot(t, pool)

	relay := startChild(t, dbURL, "RELAY_ID=wal", "RELAY_MODE=wal", "RELAY_SLOT="+slot)
	publishOne(t, ctx, pool, topic, "order-1", "the WAL relay")
	if code, body := relay.call(t, "GET", "/metrics", "", ""); code != 200 || !strings.Contains(body, "paylab_outbox_wal_active_reader 1") {
		t.Fatalf("/metrics = %d, without paylab_outbox_wal_active_reader 1", code)
	}
	if err := relay.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := relay.exitCode(t, 20*time.Second); code != 0 {
		t.Fatalf("WAL relay exit status %d after SIGTERM, want 0", code)
	}
}

// walSlot names a replication slot for the test, dropped at its end.
func walSlot(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	slot := fmt.Sprintf("t_relaycmd_%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for dctx.Err() == nil {
			if err := outbox.DropWAL(dctx, pool, outbox.WALConfig{Slot: slot}); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("slot %s not dropped", slot)
	})
	return slot
}

// publishOne commits an event and waits until a relay (who) has
// dispatched it.
func publishOne(t *testing.T, ctx context.Context, pool *pgxpool.Pool, topic, orderID, who string) {
	t.Helper()
	e := outbox.Event{AggregateType: "order", AggregateID: orderID, Type: "OrderCaptured", Sequence: 1,
		Topic: topic, Payload: json.RawMessage(fmt.Sprintf(`{"order_id":%q}`, orderID))}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, e) }); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, who+" to dispatch "+orderID, func() bool {
		var pending int
		_ = pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL").Scan(&pending)
		return pending == 0
	})
}

// exitedWith waits for the process to exit with status want and returns
// its output.
func (c *child) exitedWith(t *testing.T, want int) string {
	t.Helper()
	if code := c.exitCode(t, 30*time.Second); code != want {
		t.Fatalf("relay process exit status %d, want %d\n%s", code, want, c.out.String())
	}
	return c.out.String()
}

// A relay process started with the RELAY_ID of a running relay exits with
// status 1, saying so; the running relay stays ready and goes on
// publishing.
func TestRelayProcessRefusesTheIDOfARunningRelay(t *testing.T) {
	t.Parallel()
	pool, dbURL := testenv.NewPool(t, "orders")
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)

	first := startChild(t, dbURL, "RELAY_ID=same")
	second := launchChild(t, dbURL, "RELAY_ID=same")
	if out := second.exitedWith(t, 1); !strings.Contains(out, "the relay ID is in use") {
		t.Fatalf("the refused relay's output does not say why:\n%s", out)
	}
	if code, _ := first.call(t, "GET", "/readyz", "", ""); code != http.StatusOK {
		t.Fatalf("the running relay's /readyz = %d after the refusal", code)
	}
	publishOne(t, ctx, pool, topic, "order-1", "the running relay")
}

// Switching RELAY_MODE back and forth, one process at a time: a WAL relay
// started while a polling relay runs is not ready and sets up nothing
// while the polling relay publishes; once that one stops, it creates its
// slot and publishes. A polling relay started while the WAL relay runs
// exits with status 1. Once the WAL relay has stopped, a polling relay
// starts, drops the slot and publishes.
func TestRelayProcessModesTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	testenv.GrantReplication(t, ctx, "orders")
	pool, dbURL := testenv.NewPool(t, "orders")
	topic := testenv.NewTopic(t, 1)
	slot := walSlot(t, pool)
	slots := func() int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	poll := startChild(t, dbURL, "RELAY_ID=poll-1", "RELAY_SLOT="+slot)
	wal := launchChild(t, dbURL, "RELAY_ID=wal", "RELAY_MODE=wal", "RELAY_SLOT="+slot)
	wal.waitReadyz(t, http.StatusServiceUnavailable)
	publishOne(t, ctx, pool, topic, "order-1", "the polling relay")
	if slots() != 0 {
		t.Fatal("the WAL relay created its slot while a polling relay ran")
	}
	if code, _ := wal.call(t, "GET", "/readyz", "", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("the waiting WAL relay's /readyz = %d, want 503", code)
	}

	if err := poll.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	poll.exitedWith(t, 0)
	wal.waitReady(t)
	if slots() != 1 {
		t.Fatal("the WAL relay runs without its slot")
	}
	publishOne(t, ctx, pool, topic, "order-2", "the WAL relay")

	refused := launchChild(t, dbURL, "RELAY_ID=poll-2", "RELAY_SLOT="+slot)
	if out := refused.exitedWith(t, 1); !strings.Contains(out, "a WAL relay runs against the table") {
		t.Fatalf("the refused polling relay's output does not say why:\n%s", out)
	}

	if err := wal.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wal.exitedWith(t, 0)
	startChild(t, dbURL, "RELAY_ID=poll-3", "RELAY_SLOT="+slot)
	testenv.Eventually(t, time.Minute, "the polling relay to drop the slot", func() bool { return slots() == 0 })
	publishOne(t, ctx, pool, topic, "order-3", "the polling relay")
}
