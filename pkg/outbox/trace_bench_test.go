package outbox

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkTracePublish measures what tracing adds to one batch of 500
// events: without a tracer provider (the relay's cost when no OTLP endpoint
// is set) and with the SDK batching spans to an exporter that drops them,
// against the baseline of building the batch's events.
func BenchmarkTracePublish(b *testing.B) {
	events := make([]Event, 500)
	r := tracingRelay()
	for _, bc := range []struct {
		name  string
		setup func() func()
	}{
		{"baseline: the events alone", nil},
		{"no provider", func() func() { otel.SetTracerProvider(noop.NewTracerProvider()); return func() {} }},
		{"sdk", func() func() {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			otel.SetTracerProvider(tp)
			return func() { _ = tp.Shutdown(context.Background()) }
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			otel.SetTextMapPropagator(propagation.TraceContext{})
			if bc.setup != nil {
				defer bc.setup()()
			}
			b.ReportAllocs()
			for b.Loop() {
				storedTrace(events)
				if bc.setup != nil {
					r.tracePublish(context.Background(), events).end(nil)
				}
			}
		})
	}
}

// Without a tracer provider that makes spans of its own, a batch's tracing
// costs the same whatever its size: no span, header copy or allocation per
// event, and each event keeps the headers it was stored with.
func TestTracePublishWithoutProviderCostsNothingPerEvent(t *testing.T) {
	otel.SetTracerProvider(noop.NewTracerProvider())
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	r := tracingRelay()
	events := storedTrace(make([]Event, 500))
	stored := events[7].Headers
	allocs := testing.AllocsPerRun(5, func() { r.tracePublish(context.Background(), events).end(nil) })
	if allocs > 20 {
		t.Errorf("tracing a batch of %d events allocated %.0f times, want a few for the batch", len(events), allocs)
	}
	stored["marker"] = "x" // the same map, not a copy
	if events[7].Headers["marker"] != "x" {
		t.Error("an event's headers were replaced although no span of its own was made")
	}
}

// tracingRelay is a relay with nothing but what tracePublish reads.
func tracingRelay() *Relay {
	return &Relay{relayCore: &relayCore{cfg: relayConfig{settings: settings{ID: "test"}}}}
}

// storedTrace fills events with new events, each stored with the trace
// context of its caller, and returns them.
func storedTrace(events []Event) []Event {
	for i := range events {
		events[i] = Event{ID: uuid.New(), AggregateID: "order", Topic: "order-events", Type: "OrderCaptured",
			Payload: json.RawMessage(`{}`),
			Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	}
	return events
}
