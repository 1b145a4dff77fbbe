package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

func TestAdminListener(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	_, _, adminURL := f.startWithAdmin(f.config(true))
	get := func(path string) (int, string) {
		resp, err := http.Get(adminURL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	testenv.Eventually(t, 60*time.Second, "/readyz to answer 200 (database up, group joined)", func() bool {
		code, _ := get("/readyz")
		return code == http.StatusOK
	})
	f.Publish(testenv.OrderCaptured("ord-m", "cus_m", "mer_m", 10, "EUR"))
	testenv.Eventually(t, 30*time.Second, "the event processed", func() bool {
		_, body := get("/metrics")
		return strings.Contains(body, `paylab_inbox_processed_total{type="OrderCaptured"} 1`)
	})
	_, body := get("/metrics")
	for _, name := range []string{
		`paylab_inbox_processed_total{type="OrderCaptured"} 1`,
		`paylab_inbox_duplicates_total{type="OrderRefunded"} 0`,
		`paylab_inbox_failed_total{reason="handler_failed"} 0`,
		`paylab_inbox_dead_lettered_total{reason="undecodable"} 0`,
		`paylab_inbox_handler_duration_seconds_count{type="OrderCaptured"} 1`,
		`paylab_inbox_consumer_lag{partition=`,
	} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
