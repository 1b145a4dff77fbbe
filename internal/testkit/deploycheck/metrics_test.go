package deploycheck

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/httpmetrics"
	"github.com/paylab/paylab/internal/platform/telemetry"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/outbox"
)

// recorder is a Registerer that remembers the name of every metric a
// component declares, whether or not it has been observed yet.
type recorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}
func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}
func (r *recorder) Unregister(prometheus.Collector) bool { return true }

// exported collects the metric names the services export: the orders API's,
// the relays' (pkg/outbox, polling and WAL) and the consumers' (pkg/inbox),
// plus Prometheus's own `up`.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	rec := &recorder{names: map[string]bool{"up": true}}
	if _, err := httpmetrics.New(rec); err != nil {
		t.Fatal(err)
	}
	// The pool is never used: constructing the components registers metrics.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := outbox.NewRelay(pool, nil, outbox.RelayConfig{MetricPrefix: telemetry.OutboxMetricPrefix, Registerer: rec}); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.NewWALRelay(pool, "postgres://nobody@127.0.0.1:1/none", nil, outbox.WALConfig{MetricPrefix: telemetry.OutboxMetricPrefix, Registerer: rec}); err != nil {
		t.Fatal(err)
	}
	_, err = inbox.NewRunner(pool, inbox.Config{
		Brokers: []string{"127.0.0.1:1"}, Topic: "t", Group: "g", Registerer: rec, MetricPrefix: telemetry.InboxMetricPrefix,
		Handlers: map[string]inbox.Handler{"OrderCaptured": func(context.Context, pgx.Tx, inbox.Message) error { return nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec.names
}

var metricRef = regexp.MustCompile(`\b(paylab_[a-z0-9_]+|up)\b`)

// used returns the metric names an expression refers to, histogram series
// suffixes folded into their metric.
func used(expr string) []string {
	var out []string
	for _, m := range metricRef.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			m = strings.TrimSuffix(m, suffix)
		}
		out = append(out, m)
	}
	return out
}

// The dashboard and the alert rules only query metrics the services export.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	t.Parallel()
	names := exported(t)

	raw, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "dashboards", "paylab.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	queries := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			queries++
			for _, m := range used(target.Expr) {
				if !names[m] {
					t.Errorf("dashboard panel %q queries %s, which no service exports", p.Title, m)
				}
			}
		}
	}
	if queries == 0 {
		t.Fatal("the dashboard has no queries")
	}

	rules, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		if expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			for _, m := range used(expr) {
				if !names[m] {
					t.Errorf("alert rule %q uses %s, which no service exports", strings.TrimSpace(expr), m)
				}
			}
		}
	}
}
