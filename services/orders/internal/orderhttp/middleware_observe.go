package orderhttp

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the API's request metrics. Labels are low-cardinality: the
// route pattern (never the path), the method and the status class.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics creates the request metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{"route", "method", "status_class"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orders_http_requests_total",
			Help: "HTTP requests served by the orders API.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orders_http_request_duration_seconds",
			Help:    "Latency of the orders API's HTTP requests.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, labels),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe records every request's metrics and writes an access log line.
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
			}
			method := methodLabel(r.Method)
			class := strconv.Itoa(status/100) + "xx"
			m.requests.WithLabelValues(route, method, class).Inc()
			m.duration.WithLabelValues(route, method, class).Observe(elapsed.Seconds())
			log.InfoContext(r.Context(), "request", "method", method, "route", route, "status", status,
				"bytes", ww.BytesWritten(), "duration_ms", float64(elapsed.Microseconds())/1000)
		})
	}
}

func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}
