// Package httpmetrics is the request metrics of paylab's HTTP APIs: a
// counter and a latency histogram labelled by route pattern (never the
// path), method and status class — low cardinality whatever the traffic.
package httpmetrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the request metrics of one API.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// New creates the request metrics and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{"route", "method", "status_class"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paylab_http_requests_total",
			Help: "HTTP requests served, by route pattern, method and status class.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "paylab_http_request_duration_seconds",
			Help:    "Latency of HTTP requests, by route pattern, method and status class.",
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

// Observe records one request.
func (m *Metrics) Observe(route, method string, status int, elapsed time.Duration) {
	method, class := Method(method), strconv.Itoa(status/100)+"xx"
	m.requests.WithLabelValues(route, method, class).Inc()
	m.duration.WithLabelValues(route, method, class).Observe(elapsed.Seconds())
}

// Method maps a request method to a label value: the standard methods as
// they are, anything else "other".
func Method(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}
