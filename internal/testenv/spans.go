package testenv

import (
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
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
			s.Attributes[string(kv.Key)] = kv.Value.Emit()
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
