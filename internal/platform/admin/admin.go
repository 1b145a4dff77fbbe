// Package admin is the admin listener every paylab process serves, apart from
// its public API: /healthz (the process is alive), /readyz (its dependencies
// answer) and /metrics (Prometheus). Services mount more routes on Router,
// such as the chaos controls.
package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether one dependency is usable; nil means ready.
type Check func(ctx context.Context) error

// Handler builds the admin routes. checks are run by /readyz, each with a
// short timeout; reg is served on /metrics (with Go and process collectors
// added). Callers may mount more routes on the returned router.
func Handler(reg *prometheus.Registry, checks map[string]Check) chi.Router {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", func(w http.ResponseWriter, req *http.Request) {
		status, body := http.StatusOK, map[string]string{}
		for name, check := range checks {
			ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
			err := check(ctx)
			cancel()
			if err != nil {
				status, body[name] = http.StatusServiceUnavailable, err.Error()
				continue
			}
			body[name] = "ok"
		}
		writeJSON(w, status, body)
	})
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return r
}

// Server returns an http.Server for the admin listener with explicit timeouts.
func Server(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
