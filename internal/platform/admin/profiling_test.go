package admin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/admin"
)

// The profiles are there only when switched on.
func TestMountProfiling(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{false, true} {
		r := admin.Handler(prometheus.NewRegistry(), nil)
		admin.MountProfiling(r, enabled)
		srv := httptest.NewServer(r)
		for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/goroutine?debug=1": "goroutine profile", "/debug/pprof/cmdline": ""} {
			res, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			switch {
			case !enabled && res.StatusCode != http.StatusNotFound:
				t.Errorf("off: GET %s = %d, want 404", path, res.StatusCode)
			case enabled && (res.StatusCode != http.StatusOK || !strings.Contains(string(b), want)):
				t.Errorf("on: GET %s = %d %.80q, want 200 with %q", path, res.StatusCode, b, want)
			}
		}
		srv.Close()
	}
}
