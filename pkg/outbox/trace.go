package outbox

import (
	"context"
	"fmt"
	"maps"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the relay's spans. The relay
// uses the global tracer provider and propagator (otel.SetTracerProvider,
// otel.SetTextMapPropagator); with none installed tracing costs next to
// nothing and the stored headers go on the wire unchanged.
const TracerName = "github.com/paylab/paylab/pkg/outbox"

// BatchSpanName is the name of the span of one batch's publish.
const BatchSpanName = "outbox publish batch"

// publishTrace traces one batch's publish:
//
//   - per event, a PRODUCER span "send <topic>" whose parent is the trace
//     context stored with the event (its traceparent header, written by
//     Enqueue's caller inside the business transaction). Its own context
//     replaces the stored one in the event's headers, so the consumers' spans
//     are its children. An event stored without trace context starts a trace
//     of its own.
//   - one "outbox publish batch" span for the batch, in the relay's own
//     trace, with a link to each event's producer span.
type publishTrace struct {
	ctx   context.Context // carries the batch span: Publish runs in it
	batch trace.Span
	spans []trace.Span // spans[i] is events[i]'s; none when the provider makes no spans
}

// tracePublish starts the spans of a batch about to be published and
// writes each producer span's context into its event's headers. Both
// relays publish through it (the WAL relay with its base Relay). The
// headers are copied before they are written: events[i].Headers is
// replaced, the map it held keeps the stored context, so an event the WAL
// relay publishes again starts again from it.
func (r *relayCore) tracePublish(ctx context.Context, events []Event) publishTrace {
	tracer := otel.Tracer(TracerName)
	prop := otel.GetTextMapPropagator()
	bctx, batch := tracer.Start(ctx, BatchSpanName, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingBatchMessageCount(len(events)),
			attribute.String("outbox.relay.id", r.cfg.ID),
		))
	pt := publishTrace{ctx: bctx, batch: batch}
	if batch.SpanContext().Equal(trace.SpanContextFromContext(ctx)) {
		// The tracer provider makes no spans of its own (none is
		// installed): each event's span would be its stored context, which
		// is in its headers already, and end would have nothing to record.
		return pt
	}
	pt.spans = make([]trace.Span, len(events))
	// An event's span descends from its stored context only, never from
	// whatever span ctx carries.
	detached := trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	var topic, name string
	for i := range events {
		e := &events[i]
		if e.Topic != topic {
			topic, name = e.Topic, "send "+e.Topic
		}
		carrier := propagation.MapCarrier(e.Headers)
		parent := prop.Extract(detached, carrier)
		ectx, span := tracer.Start(parent, name, trace.WithSpanKind(trace.SpanKindProducer))
		pt.spans[i] = span
		sc := span.SpanContext()
		if sc.IsValid() && sc.SpanID() != trace.SpanContextFromContext(parent).SpanID() {
			// A span of its own (without a tracer provider the span is the
			// stored context itself, already in the headers).
			h := make(map[string]string, len(e.Headers)+2)
			maps.Copy(h, e.Headers)
			prop.Inject(ectx, propagation.MapCarrier(h))
			e.Headers = h
		}
		if !span.IsRecording() {
			continue // attributes and links are built for recorded spans only
		}
		id := e.ID.String()
		span.SetAttributes(
			semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
			semconv.MessagingDestinationName(e.Topic),
			semconv.MessagingMessageID(id),
			semconv.MessagingKafkaMessageKey(e.AggregateID),
			semconv.CloudEventsEventID(id),
			semconv.CloudEventsEventType(e.Type),
			semconv.CloudEventsEventSubject(e.AggregateID),
			attribute.Int64("outbox.event.sequence", e.Sequence),
		)
		if batch.IsRecording() {
			batch.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{semconv.MessagingMessageID(id)}})
		}
	}
	return pt
}

// end records the publisher's result (nil: all acknowledged; else one error
// per event) on the spans and ends them.
func (pt publishTrace) end(errs []error) {
	if pt.spans == nil {
		pt.batch.End()
		return
	}
	malformed := errs != nil && len(errs) != len(pt.spans)
	failed := 0
	for i, span := range pt.spans {
		var err error
		switch {
		case malformed:
			err = fmt.Errorf("publisher returned %d results for %d events", len(errs), len(pt.spans))
		case errs != nil:
			err = errs[i]
		}
		if err != nil {
			failed++
			span.RecordError(err)
			span.SetStatus(codes.Error, "not acknowledged by the broker")
		}
		span.End()
	}
	pt.batch.SetAttributes(attribute.Int("outbox.batch.failed", failed))
	if failed > 0 {
		pt.batch.SetStatus(codes.Error, fmt.Sprintf("%d of %d events not acknowledged", failed, len(pt.spans)))
	}
	pt.batch.End()
}
