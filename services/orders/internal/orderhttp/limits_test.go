package orderhttp_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
	"github.com/paylab/paylab/services/orders/internal/orderhttp"
)

// Each key has its own request rate: past its burst, 429 rate_limited
// with Retry-After, and nothing happens; another key is not held back.
func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
	b := setupSecured(t, func(s *orderhttp.Security) {
		s.Limiter = apikey.NewLimiter(apikey.LimitConfig{Rate: 0.5, Burst: 2})
	})
	for i := range 2 {
		if res := b.do(http.MethodPost, "/v1/payments", paymentBody); res.Status != http.StatusCreated {
			t.Fatalf("request %d within the burst: %d %s", i, res.Status, res.Body)
		}
	}
	res := b.do(http.MethodPost, "/v1/payments", paymentBody, "Idempotency-Key", "limited-1")
	if res.Status != http.StatusTooManyRequests || res.json(t)["code"] != "rate_limited" || res.Header.Get("Retry-After") != "2" {
		t.Fatalf("past the burst: %d %v %s, want 429 rate_limited with Retry-After: 2", res.Status, res.Header, res.Body)
	}
	if res := b.do(http.MethodGet, "/v1/orders/0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d", ""); res.Status != http.StatusTooManyRequests {
		t.Fatalf("a read past the burst: %d %s", res.Status, res.Body)
	}
	if n := b.count("SELECT count(*) FROM orders"); n != 2 {
		t.Fatalf("orders = %d, want the 2 within the burst", n)
	}
	if n := b.count("SELECT count(*) FROM idempotency_keys"); n != 0 {
		t.Fatalf("a refused request stored its key")
	}
	other := "Bearer " + b.newKey("mer_8")
	if res := b.do(http.MethodPost, "/v1/payments", `{"customer_id":"cus_1","amount":5,"currency":"EUR"}`, "Authorization", other); res.Status != http.StatusCreated {
		t.Fatalf("another key: %d %s", res.Status, res.Body)
	}
}

// A database whose connections are all taken (stuck) answers 503
// database_unavailable after the acquire timeout, not when the client
// gives up; once a connection is free, requests succeed again.
func TestPoolExhaustedFailsFast(t *testing.T) {
	t.Parallel()
	var small *pgxpool.Pool
	b := setup(t, func(c *orderapp.Config) {
		pc := c.Pool.Config()
		pc.MaxConns = 1
		var err error
		if small, err = pgxpool.NewWithConfig(context.Background(), pc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(small.Close)
		c.Pool, c.AcquireTimeout = small, 200*time.Millisecond
	})
	held, err := small.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/payments", paymentBody},
		{http.MethodGet, "/v1/orders/0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d", ""},
	} {
		start := time.Now()
		res := b.do(tc.method, tc.path, tc.body)
		if elapsed := time.Since(start); res.Status != http.StatusServiceUnavailable || res.json(t)["code"] != "database_unavailable" || elapsed > 3*time.Second {
			t.Errorf("%s %s with no free connection: %d %s after %s, want 503 database_unavailable at once", tc.method, tc.path, res.Status, res.Body, elapsed)
		}
	}
	held.Release()
	if res := b.do(http.MethodPost, "/v1/payments", paymentBody); res.Status != http.StatusCreated {
		t.Fatalf("with the connection free again: %d %s", res.Status, res.Body)
	}
}

// A statement stuck behind a lock is cancelled at the request's deadline:
// 503, nothing committed, and the API serves again once the lock is gone.
func TestRequestDeadline(t *testing.T) {
	t.Parallel()
	b := setupSecured(t, func(s *orderhttp.Security) { s.RequestTimeout = 500 * time.Millisecond })
	// The key is checked (and cached) before the table is locked.
	if res := b.do(http.MethodGet, "/v1/orders/0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d", ""); res.Status != http.StatusNotFound {
		t.Fatalf("warm-up: %d %s", res.Status, res.Body)
	}
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE orders IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := b.do(http.MethodPost, "/v1/payments", paymentBody, "Idempotency-Key", "stuck-1")
	if elapsed := time.Since(start); res.Status != http.StatusServiceUnavailable || elapsed > 5*time.Second {
		t.Fatalf("behind a lock: %d %s after %s, want 503 after about 500ms", res.Status, res.Body, elapsed)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.count("SELECT count(*) FROM orders"); n != 0 {
		t.Fatalf("orders = %d after the timed-out request, want 0", n)
	}
	// The cancelled statement's session may take a moment to end and
	// release the key (409 in flight meanwhile); then the retry runs anew.
	testenv.Eventually(t, 10*time.Second, "the retry with the same key", func() bool {
		res := b.do(http.MethodPost, "/v1/payments", paymentBody, "Idempotency-Key", "stuck-1")
		if res.Status != http.StatusCreated && res.Status != http.StatusConflict {
			t.Fatalf("the retry: %d %s", res.Status, res.Body)
		}
		return res.Status == http.StatusCreated && res.Header.Get("Idempotency-Replayed") == ""
	})
}
