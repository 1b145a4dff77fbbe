package orderhttp

import (
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

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
		{"state too long dropped", []string{valid}, []string{strings.Repeat("a", 513)}, map[string]string{"traceparent": valid}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"state without parent ignored", nil, []string{"congo=t61rcWkgMzE"}, nil, ""},
		{"upper case hex", []string{strings.ToUpper(valid)}, nil, nil, ""},
		{"version ff", []string{"ff" + valid[2:]}, nil, nil, ""},
		{"zero trace id", []string{"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, nil, nil, ""},
		{"zero parent id", []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}, nil, nil, ""},
		{"short", []string{valid[:54]}, nil, nil, ""},
		{"two headers", []string{valid, valid}, nil, nil, ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		for _, v := range tt.traceparent {
			r.Header.Add("traceparent", v)
		}
		for _, v := range tt.tracestate {
			r.Header.Add("tracestate", v)
		}
		got, traceID := traceContext(r)
		if !reflect.DeepEqual(got, tt.want) || traceID != tt.traceID {
			t.Errorf("%s: got %v %q, want %v %q", tt.name, got, traceID, tt.want, tt.traceID)
		}
	}
}
