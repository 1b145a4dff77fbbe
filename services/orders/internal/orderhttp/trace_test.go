package orderhttp

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The trace context a request's work runs in, as it is stored with the
// events the request causes: the caller's, when well-formed (TestMain
// installs the W3C propagator, as the process does; no spans are recorded,
// so the context passes through unchanged).
func TestTraceContext(t *testing.T) {
	t.Parallel()
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name        string
		traceparent []string
		tracestate  []string
		want        map[string]string
		traceID     string
	}{
		{"none", nil, nil, nil, ""},
		{"valid", []string{valid}, nil, map[string]string{"traceparent": valid}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"valid with state", []string{valid}, []string{"congo=t61rcWkgMzE"}, map[string]string{"traceparent": valid, "tracestate": "congo=t61rcWkgMzE"}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"state in two headers joined", []string{valid}, []string{"congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7"}, map[string]string{"traceparent": valid, "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"state too long dropped", []string{valid}, []string{strings.Repeat("a", 513)}, map[string]string{"traceparent": valid}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"state without parent ignored", nil, []string{"congo=t61rcWkgMzE"}, nil, ""},
		{"upper case hex", []string{strings.ToUpper(valid)}, nil, nil, ""},
		{"version ff", []string{"ff" + valid[2:]}, nil, nil, ""},
		{"zero trace id", []string{"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, nil, nil, ""},
		{"zero parent id", []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}, nil, nil, ""},
		{"short", []string{valid[:54]}, nil, nil, ""},
		{"version 00 with extra fields", []string{valid + "-00"}, nil, nil, ""},
		{"two headers", []string{valid, valid}, nil, nil, ""},
	}
	for _, tt := range tests {
		var got map[string]string
		var traceID string
		h := traced(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			carrier := propagation.MapCarrier{}
			otel.GetTextMapPropagator().Inject(r.Context(), carrier)
			if len(carrier) > 0 {
				got = carrier
			}
			if sc := trace.SpanContextFromContext(r.Context()); sc.HasTraceID() {
				traceID = sc.TraceID().String()
			}
		}))
		r := httptest.NewRequest("GET", "/", nil)
		for _, v := range tt.traceparent {
			r.Header.Add("traceparent", v)
		}
		for _, v := range tt.tracestate {
			r.Header.Add("tracestate", v)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if !reflect.DeepEqual(got, tt.want) || traceID != tt.traceID {
			t.Errorf("%s: got %v %q, want %v %q", tt.name, got, traceID, tt.want, tt.traceID)
		}
	}
}
