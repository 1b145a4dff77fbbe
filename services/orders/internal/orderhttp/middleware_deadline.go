package orderhttp

import (
	"context"
	"net/http"
	"time"
)

// deadline gives every request at most d (nothing when d is 0): its key
// lookup, its wait for a database connection and its statements are
// cancelled then, and it is answered 503, so that a stuck database costs a
// client d and never a request that hangs as long as the client waits.
func deadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if d <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}
