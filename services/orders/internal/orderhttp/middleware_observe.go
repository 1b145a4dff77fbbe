package orderhttp

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/httpmetrics"
)

// Metrics are the API's request metrics (package httpmetrics).
type Metrics = httpmetrics.Metrics

// NewMetrics creates the request metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) { return httpmetrics.New(reg) }

// observe records every request's metrics, writes an access log line and
// names the request's span after its route.
func observe(log *slog.Logger, m *Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)
			elapsed := time.Since(start)

			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			route := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
				nameSpan(r, route)
			}
			m.Observe(route, r.Method, status, elapsed)
			log.InfoContext(r.Context(), "request", "method", httpmetrics.Method(r.Method), "route", route, "status", status,
				"bytes", ww.BytesWritten(), "duration_ms", float64(elapsed.Microseconds())/1000)
		})
	}
}
