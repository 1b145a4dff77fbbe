package admin_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/admin"
)

func TestAdminEndpoints(t *testing.T) {
	t.Parallel()
	dbDown := errors.New("connection refused")
	var failing bool
	reg := prometheus.NewRegistry()
	hits := prometheus.NewCounter(prometheus.CounterOpts{Name: "paylab_test_hits_total", Help: "hits"})
	reg.MustRegister(hits)
	hits.Inc()
	srv := httptest.NewServer(admin.Handler(reg, map[string]admin.Check{
		"database": func(context.Context) error {
			if failing {
				return dbDown
			}
			return nil
		},
	}))
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	tests := []struct {
		name     string
		failing  bool
		path     string
		status   int
		contains string
	}{
		{"healthz", false, "/healthz", 200, `"ok"`},
		{"ready", false, "/readyz", 200, `"database":"ok"`},
		{"not ready", true, "/readyz", 503, "connection refused"},
		{"healthz while not ready", true, "/healthz", 200, `"ok"`},
		{"metrics", false, "/metrics", 200, "paylab_test_hits_total 1"},
	}
	for _, tt := range tests {
		failing = tt.failing
		status, body := get(tt.path)
		if status != tt.status || !strings.Contains(body, tt.contains) {
			t.Errorf("%s: GET %s = %d %q, want %d containing %q", tt.name, tt.path, status, body, tt.status, tt.contains)
		}
	}
}

func TestSumSamples(t *testing.T) {
	t.Parallel()
	exposition := `# HELP paylab_x_total x
# TYPE paylab_x_total counter
paylab_x_total{kind="a"} 2
paylab_x_total{kind="b"} 3.5
paylab_x_total_other 100
paylab_y 7
`
	if sum, found := admin.SumSamples(strings.NewReader(exposition), "paylab_x_total"); !found || sum != 5.5 {
		t.Errorf("paylab_x_total = %v, %v; want 5.5, true", sum, found)
	}
	if sum, found := admin.SumSamples(strings.NewReader(exposition), "paylab_y"); !found || sum != 7 {
		t.Errorf("paylab_y = %v, %v; want 7, true", sum, found)
	}
	if _, found := admin.SumSamples(strings.NewReader(exposition), "paylab_z"); found {
		t.Error("paylab_z found")
	}
}

func TestMetric(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	hits := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paylab_test_hits_total", Help: "hits"}, []string{"kind"})
	reg.MustRegister(hits)
	hits.WithLabelValues("a").Add(2)
	hits.WithLabelValues("b").Add(3)
	srv := httptest.NewServer(admin.Handler(reg, nil))
	defer srv.Close()
	ctx := context.Background()
	if v, err := admin.Metric(ctx, srv.URL, "paylab_test_hits_total"); err != nil || v != 5 {
		t.Errorf("Metric = %v, %v; want 5", v, err)
	}
	// The chaos runner tells a restarted process from the one it crashed by
	// its start time, which the process collector exports.
	if v, err := admin.Metric(ctx, srv.URL, "process_start_time_seconds"); err != nil || v <= 0 {
		t.Errorf("process_start_time_seconds = %v, %v", v, err)
	}
	if _, err := admin.Metric(ctx, srv.URL, "paylab_nothing"); err == nil {
		t.Error("a missing metric gave no error")
	}
	srv.Close()
	if _, err := admin.Metric(ctx, srv.URL, "paylab_test_hits_total"); err == nil {
		t.Error("a closed listener gave no error")
	}
}
