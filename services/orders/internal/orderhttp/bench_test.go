package orderhttp_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
	"github.com/paylab/paylab/services/orders/internal/orderhttp"
)

// BenchmarkPlacePayment measures POST /v1/payments through the handler on
// the real database: one transaction with the order, its capture, the
// outbox row and (with a key) the idempotency key, behind the API key's
// check (cached) and its rate limit.
func BenchmarkPlacePayment(b *testing.B) {
	for _, withKey := range []bool{false, true} {
		b.Run("idempotency_key="+strconv.FormatBool(withKey), func(b *testing.B) {
			pool, _ := testenv.NewPool(b, "orders")
			log := slog.New(slog.NewJSONHandler(io.Discard, nil))
			app, err := orderapp.New(orderapp.Config{Pool: pool, Topic: testTopic, Logger: log})
			if err != nil {
				b.Fatal(err)
			}
			m, _ := orderhttp.NewMetrics(prometheus.NewRegistry())
			sec, key := secured(b, pool)
			sec.Limiter = apikey.NewLimiter(apikey.LimitConfig{Rate: 1e9, Burst: 1e9})
			h := orderhttp.Routes(app, log, m, sec)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				i++
				req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/payments", strings.NewReader(paymentBody))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				if withKey {
					req.Header.Set("Idempotency-Key", "bench-"+strconv.Itoa(i))
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
