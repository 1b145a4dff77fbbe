package apiserver_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/orders/internal/apiserver"
	"github.com/paylab/paylab/services/orders/internal/config"
)

// process is a running orders API.
type process struct {
	api, admin string // base URLs
	pool       *pgxpool.Pool
	key        string // an API key of merchant mer_7
	stop       func() error
}

// start runs the API process on free ports against a fresh database, with
// KAFKA_BROKERS pointing at a port nothing listens on.
func start(t *testing.T, mode string, adjust ...func(*config.API)) *process {
	t.Helper()
	pool, dbURL := testenv.NewPool(t, "orders")
	cfg := config.API{
		DatabaseURL: dbURL, KafkaBrokers: testenv.ClosedAddr(t), OrdersTopic: "order-events",
		HTTPAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", OutboxMode: mode, LogLevel: "info",
		IdempotencyRetention: 24 * time.Hour, IdempotencyPruneInterval: time.Minute,
		ShutdownTimeout: 5 * time.Second, DatabaseMaxConns: 4,
		DatabaseAcquireTimeout: 2 * time.Second, RequestTimeout: 10 * time.Second,
		APIKeyCacheTTL: 10 * time.Second, APIRateLimit: 200, APIRateBurst: 400,
	}
	for _, f := range adjust {
		f(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- apiserver.Run(ctx, cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)), apiserver.Options{
			OnListen: func(api, admin net.Addr) { addrs <- [2]net.Addr{api, admin} },
		})
	}()
	key, _, err := apikey.NewStore(pool).Create(context.Background(), "mer_7", "test")
	if err != nil {
		t.Fatal(err)
	}
	p := &process{pool: pool, key: key}
	select {
	case a := <-addrs:
		p.api, p.admin = "http://"+a[0].String(), "http://"+a[1].String()
	case err := <-done:
		cancel()
		t.Fatalf("the API stopped at start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the API did not listen within 30 s")
	}
	stopped := false
	p.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("the API did not stop within 20 s")
			return nil
		}
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("stopping: %v", err)
		}
	})
	return p
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func pay(t *testing.T, p *process) (int, string) {
	t.Helper()
	status, _, body := payWith(t, p, "Bearer "+p.key, "k-1")
	return status, body
}

// payWith places a payment with the Authorization auth (none when empty).
func payWith(t *testing.T, p *process, auth, idempotencyKey string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.api+"/v1/payments",
		strings.NewReader(`{"customer_id":"cus_42","merchant_id":"mer_7","amount":1999,"currency":"EUR"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idempotencyKey)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// The process as configured: no key is 401 with a challenge, a key over
// API_RATE_LIMIT is 429 with Retry-After.
func TestAPIKeysAndRateLimit(t *testing.T) {
	t.Parallel()
	p := start(t, "outbox", func(c *config.API) { c.APIRateLimit, c.APIRateBurst = 0.1, 1 })
	if status, h, body := payWith(t, p, "", "k-0"); status != http.StatusUnauthorized ||
		h.Get("WWW-Authenticate") != `Bearer realm="paylab"` || !strings.Contains(body, `"code":"unauthenticated"`) {
		t.Fatalf("without a key: %d %v %s", status, h, body)
	}
	if status, body := pay(t, p); status != http.StatusCreated {
		t.Fatalf("with the key: %d %s", status, body)
	}
	if status, h, body := payWith(t, p, "Bearer "+p.key, "k-2"); status != http.StatusTooManyRequests ||
		h.Get("Retry-After") != "10" || !strings.Contains(body, `"code":"rate_limited"`) {
		t.Fatalf("over the rate: %d %v %s", status, h, body)
	}
}

func count(t *testing.T, p *process, query string) int {
	t.Helper()
	var n int
	if err := p.pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// G5 from the API's side: with Kafka unreachable, POST /v1/payments succeeds
// in outbox mode, and the event waits in the outbox.
func TestPaymentWithKafkaUnreachableOutboxMode(t *testing.T) {
	t.Parallel()
	p := start(t, "outbox")
	if status, body := pay(t, p); status != http.StatusCreated {
		t.Fatalf("POST /v1/payments = %d %s", status, body)
	}
	if n := count(t, p, "SELECT count(*) FROM orders WHERE status = 'captured'"); n != 1 {
		t.Fatalf("captured orders = %d, want 1", n)
	}
	if n := count(t, p, "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"); n != 1 {
		t.Fatalf("pending outbox rows = %d, want 1: the event is kept for the relay", n)
	}
}

// The same outage in naive mode: the payment "succeeds", the order is
// committed, and its event exists nowhere — not in the outbox, not on the
// wire (the publish failed, as the metric shows). The hole, asserted.
func TestPaymentWithKafkaUnreachableNaiveMode(t *testing.T) {
	t.Parallel()
	p := start(t, "naive")
	if status, body := pay(t, p); status != http.StatusCreated {
		t.Fatalf("POST /v1/payments = %d %s", status, body)
	}
	if n := count(t, p, "SELECT count(*) FROM orders WHERE status = 'captured'"); n != 1 {
		t.Fatalf("captured orders = %d, want 1 (committed)", n)
	}
	if n := count(t, p, "SELECT count(*) FROM outbox"); n != 0 {
		t.Fatalf("outbox rows = %d, want 0", n)
	}
	_, metrics := get(t, p.admin+"/metrics")
	if !strings.Contains(metrics, `paylab_orders_naive_publish_total{result="failed"} 1`) {
		t.Fatalf("the failed publish is not counted:\n%s", grep(metrics, "orders_naive"))
	}
}

func TestAdminListener(t *testing.T) {
	t.Parallel()
	p := start(t, "outbox")
	pay(t, p)
	if status, body := get(t, p.admin+"/healthz"); status != http.StatusOK {
		t.Errorf("/healthz = %d %s", status, body)
	}
	if status, body := get(t, p.admin+"/readyz"); status != http.StatusOK || !strings.Contains(body, `"database":"ok"`) {
		t.Errorf("/readyz = %d %s", status, body)
	}
	_, metrics := get(t, p.admin+"/metrics")
	for _, want := range []string{
		`paylab_http_requests_total{method="POST",route="/v1/payments",status_class="2xx"} 1`,
		`paylab_http_request_duration_seconds_bucket{method="POST",route="/v1/payments",status_class="2xx",le="+Inf"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if status, body := get(t, p.admin+"/docs"); status != http.StatusOK || !strings.Contains(body, `id="placePayment"`) {
		t.Errorf("/docs = %d, want 200 and the API's page", status)
	}
	// The public listener does not serve the admin routes.
	for _, path := range []string{"/metrics", "/docs"} {
		if status, _ := get(t, p.api+path); status != http.StatusNotFound {
			t.Errorf("public %s = %d, want 404", path, status)
		}
	}
	if err := p.stop(); err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
	if _, err := http.Get(p.api + "/v1/orders/x"); err == nil {
		t.Fatal("the API still answers after shutdown")
	}
}

// /readyz fails when the database does not answer.
func TestReadyzFailsWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	p := start(t, "outbox")
	var dbName string
	if err := p.pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	testenv.DropDatabase(t, dbName) // disconnects the API's sessions
	status, body := get(t, p.admin+"/readyz")
	if status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d %s, want 503", status, body)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The chaos controls exist only with CHAOS_ENABLED, need the token, and an
// armed fault fails a payment at its step boundary (503, nothing committed).
// Not parallel: faults are armed on the process-wide registry.
func TestChaosControls(t *testing.T) {
	off := start(t, "outbox")
	if status, _ := get(t, off.admin+"/chaos/faults"); status != http.StatusNotFound {
		t.Fatalf("without CHAOS_ENABLED: GET /chaos/faults = %d, want 404", status)
	}

	p := start(t, "outbox", func(c *config.API) { c.ChaosEnabled, c.ChaosToken = true, "s3cret-chaos-token" })
	call := func(method, path, token, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, p.admin+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := call(http.MethodGet, "/chaos/faults", "", ""); got != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", got)
	}
	if got := call(http.MethodGet, "/chaos/faults", "wrong", ""); got != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", got)
	}
	t.Cleanup(func() { call(http.MethodDelete, "/chaos/faults", "s3cret-chaos-token", "") })
	if got := call(http.MethodPut, "/chaos/faults/orders.before_commit", "s3cret-chaos-token", `{"action":"error","count":1}`); got/100 != 2 {
		t.Fatalf("arming: %d", got)
	}
	if status, body := pay(t, p); status != http.StatusServiceUnavailable || !strings.Contains(body, "fault_injected") {
		t.Fatalf("payment with an armed fault = %d %s, want 503 fault_injected", status, body)
	}
	if n := count(t, p, "SELECT count(*) FROM orders"); n != 0 {
		t.Fatalf("%d orders committed despite the fault before commit", n)
	}
	// The fault fired its one time; the client's retry with the same key succeeds.
	if status, body := pay(t, p); status != http.StatusCreated {
		t.Fatalf("retry = %d %s, want 201", status, body)
	}
}

// With the database unreachable a payment is refused cleanly — 503
// database_unavailable, to be retried with the same key — never a 500.
func TestPaymentWithDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	p := start(t, "outbox", func(c *config.API) {
		c.DatabaseURL = "postgres://orders:orders@" + testenv.ClosedAddr(t) + "/orders?sslmode=disable&connect_timeout=2"
	})
	status, body := pay(t, p)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "database_unavailable") {
		t.Fatalf("payment = %d %s, want 503 database_unavailable", status, body)
	}
}
