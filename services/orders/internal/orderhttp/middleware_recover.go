package orderhttp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
)

// recoverer turns a panic in a handler into a logged 500 problem instead of
// a dropped connection.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				log.ErrorContext(r.Context(), "handler panicked", "error", fmt.Errorf("panic: %v", v), "stack", string(debug.Stack()))
				writeProblem(w, r, problemFor(errors.New("panic")))
			}()
			next.ServeHTTP(w, r)
		})
	}
}
