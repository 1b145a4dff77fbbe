package orderhttp

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// W3C Trace Context headers (https://www.w3.org/TR/trace-context/).
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// traced runs every request in an OpenTelemetry server span (otelhttp): the
// caller's W3C trace context is extracted with the global propagator, so the
// span continues the caller's trace (or starts one), and the handlers' work —
// the transaction, the event it stores — nests under it. A malformed
// traceparent is ignored, as the W3C asks. The span is named by method here
// and by route once the router has matched one (nameSpan).
func traced(next http.Handler) http.Handler {
	h := otelhttp.NewHandler(next, "orders",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, normalizeTraceHeaders(r))
	})
}

// normalizeTraceHeaders applies the W3C rules the propagator leaves to the
// transport: a request with more than one traceparent header starts a new
// trace (the header is dropped), and several tracestate headers form one
// list. r is copied before its headers change.
func normalizeTraceHeaders(r *http.Request) *http.Request {
	tp, ts := r.Header.Values(HeaderTraceparent), r.Header.Values(HeaderTracestate)
	if len(tp) <= 1 && len(ts) <= 1 {
		return r
	}
	r = r.Clone(r.Context())
	if len(tp) > 1 {
		r.Header.Del(HeaderTraceparent)
	}
	if len(ts) > 1 {
		r.Header.Set(HeaderTracestate, strings.Join(ts, ","))
	}
	return r
}

// nameSpan names the request's server span after the matched route
// ("POST /v1/payments"), the low-cardinality name OpenTelemetry's HTTP
// conventions ask for, and records the route.
func nameSpan(r *http.Request, route string) {
	if route == "" {
		return
	}
	span := trace.SpanFromContext(r.Context())
	span.SetName(r.Method + " " + route)
	span.SetAttributes(semconv.HTTPRoute(route))
}
