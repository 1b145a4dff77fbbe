package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span is a finished span as a test inspects it, whether it was recorded in
// this process (SpansFromStubs) or exported by another over OTLP (OTLP).
type Span struct {
	Service    string // the resource's service.name; "" when not known
	Name       string
	Kind       trace.SpanKind
	TraceID    trace.TraceID
	SpanID     trace.SpanID
	Parent     trace.SpanID // invalid for a root span
	Attributes map[string]string
	Events     []string
	Links      []trace.SpanContext
	Error      bool // status Error
}

// String is a one-line summary for failure messages.
func (s Span) String() string {
	return fmt.Sprintf("%s %q (%s) %s/%s parent %s", s.Service, s.Name, s.Kind, s.TraceID, s.SpanID, s.Parent)
}

// SpansFromStubs converts spans recorded by an in-memory exporter.
func SpansFromStubs(stubs tracetest.SpanStubs, service string) []Span {
	out := make([]Span, 0, len(stubs))
	for _, st := range stubs {
		s := Span{
			Service: service, Name: st.Name, Kind: st.SpanKind,
			TraceID: st.SpanContext.TraceID(), SpanID: st.SpanContext.SpanID(), Parent: st.Parent.SpanID(),
			Attributes: map[string]string{}, Error: st.Status.Code == codes.Error,
		}
		for _, kv := range st.Attributes {
			s.Attributes[string(kv.Key)] = kv.Value.String()
		}
		for _, e := range st.Events {
			s.Events = append(s.Events, e.Name)
		}
		for _, l := range st.Links {
			s.Links = append(s.Links, l.SpanContext)
		}
		out = append(out, s)
	}
	return out
}

// FindSpans returns the spans named name (a prefix when it ends in "*")
// whose attributes include every key, value pair of attrs.
func FindSpans(spans []Span, name string, attrs ...string) []Span {
	var out []Span
next:
	for _, s := range spans {
		if prefix, ok := strings.CutSuffix(name, "*"); ok && !strings.HasPrefix(s.Name, prefix) || !ok && s.Name != name {
			continue
		}
		for i := 0; i+1 < len(attrs); i += 2 {
			if s.Attributes[attrs[i]] != attrs[i+1] {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// RecordSpans installs a global tracer provider that records into memory,
// and the W3C propagator, as a traced process has them, until the test
// ends. Tests using it must not run in parallel: the provider is global.
func RecordSpans(t *testing.T) (*tracetest.InMemoryExporter, trace.Tracer) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		_ = tp.Shutdown(context.Background())
	})
	return spans, tp.Tracer("test")
}

// SpanAttr is the value of a recorded span's attribute, "" when it has none.
func SpanAttr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}
