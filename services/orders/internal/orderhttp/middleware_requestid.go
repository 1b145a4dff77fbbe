package orderhttp

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"

	"go.opentelemetry.io/otel/trace"

	"github.com/paylab/paylab/services/orders/internal/logctx"
)

// HeaderRequestID carries the request id, taken from the client when it
// sends a sensible one, else generated; echoed in every response.
const HeaderRequestID = "X-Request-Id"

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID gives every request an id and puts it, and the id of the trace
// the request runs in (the caller's, from a well-formed traceparent, or a new
// one when spans are recorded), on every log line logged with the request's
// context.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if !requestIDRE.MatchString(id) {
			id = newRequestID()
		}
		w.Header().Set(HeaderRequestID, id)
		attrs := []slog.Attr{slog.String("request_id", id)}
		if sc := trace.SpanContextFromContext(r.Context()); sc.HasTraceID() {
			attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
		}
		next.ServeHTTP(w, r.WithContext(logctx.With(r.Context(), attrs...)))
	})
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
