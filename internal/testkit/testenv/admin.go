package testenv

import (
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/chaos"
)

// AdminListener serves what a paylab process's admin listener serves —
// /healthz, /readyz, /metrics, and the chaos controls behind token when
// chaosEnabled — for tests of clients that drive processes through it. It
// returns the base URL; the server stops at cleanup.
func AdminListener(t testing.TB, chaosEnabled bool, token string) string {
	t.Helper()
	r := admin.Handler(prometheus.NewRegistry(), nil)
	if err := chaos.Mount(r, chaos.NewRegistry(), chaosEnabled, token); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}
