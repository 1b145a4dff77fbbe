package orderhttp_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paylab/paylab/api/apitest"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/orders/internal/logctx"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
	"github.com/paylab/paylab/services/orders/internal/orderhttp"
)

// Request metrics are labelled by route pattern, never by path, so order
// ids cannot blow up the series count.
func TestMetricsUseRoutePatterns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.placePayment()
	b.do(http.MethodGet, "/v1/orders/"+id, "")
	b.do(http.MethodGet, "/v1/orders/"+b.placePayment(), "")
	b.do(http.MethodGet, "/v1/orders/bad", "")
	b.do(http.MethodGet, "/no/such/"+id, "")

	want := `
# HELP paylab_http_requests_total HTTP requests served, by route pattern, method and status class.
# TYPE paylab_http_requests_total counter
paylab_http_requests_total{method="GET",route="/v1/orders/{id}",status_class="2xx"} 2
paylab_http_requests_total{method="GET",route="/v1/orders/{id}",status_class="4xx"} 1
paylab_http_requests_total{method="GET",route="unmatched",status_class="4xx"} 1
paylab_http_requests_total{method="POST",route="/v1/payments",status_class="2xx"} 2
`
	if err := testutil.GatherAndCompare(b.reg, strings.NewReader(want), "paylab_http_requests_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(b.reg, "paylab_http_request_duration_seconds"); n != 4 {
		t.Fatalf("latency series = %d, want 4", n)
	}
}

// Every log line of a request carries its request id (the client's, when
// sensible) and the trace id of its traceparent.
func TestLogsCarryRequestAndTraceIDs(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, "orders")
	var buf bytes.Buffer
	log := slog.New(logctx.Handler(slog.NewJSONHandler(&buf, nil)))
	app, err := orderapp.New(orderapp.Config{Pool: pool, Topic: testTopic, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := orderhttp.NewMetrics(prometheus.NewRegistry())
	sec, key := secured(t, pool)
	h := apitest.ContractOf(t, apitest.Orders).Handler(t, orderhttp.Routes(app, log, m, sec))

	req := httptest.NewRequest(http.MethodPost, "/v1/payments", strings.NewReader(paymentBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Request-Id", "req-123")
	req.Header.Set("traceparent", traceparent)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated || rec.Header().Get("X-Request-Id") != "req-123" {
		t.Fatalf("status %d, X-Request-Id %q", rec.Code, rec.Header().Get("X-Request-Id"))
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line: %v: %s", err, buf.Bytes())
	}
	if line["request_id"] != "req-123" || line["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || line["route"] != "/v1/payments" {
		t.Fatalf("log line = %v", line)
	}

	// A request id that is not sensible is replaced.
	req = httptest.NewRequest(http.MethodGet, "/v1/orders/x", nil)
	req.Header.Set("X-Request-Id", "bad id\n")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if got := rec.Header().Get("X-Request-Id"); got == "" || got == "bad id\n" {
		t.Fatalf("X-Request-Id = %q", got)
	}
}
