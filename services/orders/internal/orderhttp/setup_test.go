package orderhttp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/api/apitest"
	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
	"github.com/paylab/paylab/services/orders/internal/orderhttp"
)

const testTopic = "order-events"

// bundle is the API under test and its collaborators.
type bundle struct {
	t       *testing.T
	pool    *pgxpool.Pool
	handler http.Handler
	reg     *prometheus.Registry
	// key is an API key of merchant mer_7, which do sends unless told
	// otherwise.
	key string
}

// setup returns the API on a fresh orders database; change adjusts the
// application's configuration (hooks, mode).
func setup(t *testing.T, change ...func(*orderapp.Config)) *bundle {
	t.Helper()
	return setupSecured(t, func(*orderhttp.Security) {}, change...)
}

// setupSecured is setup with the API's Security adjusted by secure (a
// rate limit, a request timeout).
func setupSecured(t *testing.T, secure func(*orderhttp.Security), change ...func(*orderapp.Config)) *bundle {
	t.Helper()
	pool, _ := testenv.NewPool(t, "orders")
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	// Requests wait for a pooled connection as long as a test may take:
	// the concurrency tests queue many requests on a small pool on a
	// loaded machine. TestPoolExhaustedFailsFast sets its own.
	cfg := orderapp.Config{Pool: pool, Topic: testTopic, Logger: log, Registerer: reg, AcquireTimeout: time.Minute}
	for _, c := range change {
		c(&cfg)
	}
	app, err := orderapp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := orderhttp.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := apikey.NewStore(pool).Create(context.Background(), "mer_7", "test")
	if err != nil {
		t.Fatal(err)
	}
	sec := orderhttp.Security{Keys: apikey.NewAuthenticator(pool, apikey.AuthConfig{TTL: time.Second})}
	secure(&sec)
	// Every request the tests send, and every response they get, is checked
	// against api/openapi.yaml.
	h := apitest.ContractOf(t, apitest.Orders).Handler(t, orderhttp.Routes(app, log, m, sec))
	return &bundle{t: t, pool: pool, handler: h, reg: reg, key: key}
}

// secured returns the API's Security on pool and a key of mer_7.
func secured(t testing.TB, pool *pgxpool.Pool) (orderhttp.Security, string) {
	t.Helper()
	key, _, err := apikey.NewStore(pool).Create(context.Background(), "mer_7", "test")
	if err != nil {
		t.Fatal(err)
	}
	return orderhttp.Security{Keys: apikey.NewAuthenticator(pool, apikey.AuthConfig{})}, key
}

// newKey creates an API key of merchant.
func (b *bundle) newKey(merchant string) string {
	b.t.Helper()
	key, _, err := apikey.NewStore(b.pool).Create(context.Background(), merchant, "test")
	if err != nil {
		b.t.Fatal(err)
	}
	return key
}

// response is a recorded response.
type response struct {
	Status int
	Header http.Header
	Body   string
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		t.Fatalf("response body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

// do sends a request; headers alternate name, value. A POST with a body gets
// Content-Type: application/json, and every request the Authorization of
// b.key, unless headers set them (an empty value removes the header).
func (b *bundle) do(method, path, body string, headers ...string) response {
	req := httptest.NewRequestWithContext(context.Background(), method, path, strings.NewReader(body))
	if method == http.MethodPost && body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Content-Type" || headers[i] == "Authorization" {
			req.Header.Del(headers[i])
			if headers[i+1] == "" {
				continue
			}
		}
		req.Header.Add(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	return response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.String()}
}

const paymentBody = `{"customer_id":"cus_42","merchant_id":"mer_7","amount":1999,"currency":"EUR"}`

// createOrder creates an authorized order and returns its id.
func (b *bundle) createOrder() string {
	b.t.Helper()
	res := b.do(http.MethodPost, "/v1/orders", paymentBody)
	if res.Status != http.StatusCreated {
		b.t.Fatalf("create order: %d %s", res.Status, res.Body)
	}
	return res.json(b.t)["id"].(string)
}

// placePayment places and captures a payment and returns the order id.
func (b *bundle) placePayment() string {
	b.t.Helper()
	res := b.do(http.MethodPost, "/v1/payments", paymentBody)
	if res.Status != http.StatusCreated {
		b.t.Fatalf("place payment: %d %s", res.Status, res.Body)
	}
	return res.json(b.t)["id"].(string)
}

// outboxRow is an outbox row as stored.
type outboxRow struct {
	EventType string
	Sequence  int64
	Topic     string
	Payload   map[string]any
	Headers   map[string]string
	Pending   bool
}

func (b *bundle) outbox(orderID string) []outboxRow {
	b.t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT event_type, sequence, topic, payload, headers,
		dispatched_at IS NULL FROM outbox WHERE aggregate_type = 'order' AND aggregate_id = $1 ORDER BY sequence`, orderID)
	if err != nil {
		b.t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.EventType, &r.Sequence, &r.Topic, &r.Payload, &r.Headers, &r.Pending); err != nil {
			b.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		b.t.Fatal(err)
	}
	return out
}

// count runs a SELECT count(*) query.
func (b *bundle) count(query string, args ...any) int {
	b.t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		b.t.Fatal(err)
	}
	return n
}

// orderRow is the stored state of an order.
type orderRow struct {
	Status                  string
	Captured, Refunded, Seq int64
	Version                 int32
}

func (b *bundle) order(id string) orderRow {
	b.t.Helper()
	var o orderRow
	err := b.pool.QueryRow(context.Background(), `SELECT status, captured_amount, refunded_amount, event_seq, version
		FROM orders WHERE id = $1`, id).Scan(&o.Status, &o.Captured, &o.Refunded, &o.Seq, &o.Version)
	if err != nil {
		b.t.Fatal(err)
	}
	return o
}
