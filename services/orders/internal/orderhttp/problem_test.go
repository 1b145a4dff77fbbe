package orderhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/services/orders/internal/order"
)

// TestProblemUnavailableIs503WithRetryAfter: every error that means the
// database is unreachable for now (a failover, a restart, the acquire
// timeout, the request deadline) is a 503 problem+json with Retry-After,
// never a 500; other failures keep their status and get no Retry-After.
func TestProblemUnavailableIs503WithRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter bool
	}{
		{"database unavailable", errors.Join(order.ErrUnavailable, errors.New("no leader")), 503, "database_unavailable", true},
		{"api keys unreadable", fmt.Errorf("%w: looking up", apikey.ErrUnavailable), 503, "database_unavailable", true},
		{"acquire timeout", errors.Join(order.ErrUnavailable, context.DeadlineExceeded), 503, "database_unavailable", true},
		{"request deadline", fmt.Errorf("committing: %w", context.DeadlineExceeded), 503, "unavailable", true},
		{"not found", order.ErrNotFound, 404, "order_not_found", false},
		{"anything else", errors.New("boom"), 500, "internal", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/v1/payments", nil)
			writeProblem(w, r, problemFor(tc.err))
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			if ct := w.Header().Get("Content-Type"); ct != ContentTypeProblem {
				t.Fatalf("Content-Type %q", ct)
			}
			if p := problemFor(tc.err); p.Code != tc.code {
				t.Fatalf("code %q, want %q", p.Code, tc.code)
			}
			if got := w.Header().Get("Retry-After") != ""; got != tc.retryAfter {
				t.Fatalf("Retry-After %q, want one: %v", w.Header().Get("Retry-After"), tc.retryAfter)
			}
		})
	}
}
