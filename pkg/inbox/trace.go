package inbox

import (
	"context"
	"strconv"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the inbox's spans. The inbox
// uses the global tracer provider and propagator (otel.SetTracerProvider,
// otel.SetTextMapPropagator); with none installed tracing costs next to
// nothing.
const TracerName = "github.com/paylab/paylab/pkg/inbox"

// Span attributes of this package, besides OpenTelemetry's messaging ones.
const (
	// AttrOutcome is the delivery's Outcome: processed, duplicate, parked or
	// dead_lettered.
	AttrOutcome = attribute.Key("inbox.outcome")
	// AttrDrained marks the span of a parked event applied once the event
	// before it arrived.
	AttrDrained = attribute.Key("inbox.drained")
)

// processSpans are the CONSUMER spans "process <topic>" of messages handled
// together, one per message, keyed by partition and offset. Each is a
// child of the trace context in its message's headers (the producer's span),
// so a consumer's work continues the trace that caused the event.
type processSpans struct {
	topic string
	byMsg map[msgPos]trace.Span
	order []trace.Span // in the order of the messages
}

type processSpansKey struct{}

// msgPos is a message's place in its topic.
type msgPos struct {
	partition int32
	offset    int64
}

// traceProcess starts the spans of kms and returns ctx carrying them; step
// hands each message its own span (MessageContext), so a handler's spans
// nest under it.
func (r *Runner) traceProcess(ctx context.Context, kms []*sarama.ConsumerMessage) (context.Context, *processSpans) {
	tracer := otel.Tracer(TracerName)
	prop := otel.GetTextMapPropagator()
	// A message's span descends from its headers only.
	detached := trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	ps := &processSpans{byMsg: make(map[msgPos]trace.Span, len(kms)), order: make([]trace.Span, len(kms))}
	var name string
	for i, km := range kms {
		if km.Topic != ps.topic || name == "" {
			ps.topic, name = km.Topic, "process "+km.Topic
		}
		headers := headerCarrier(km.Headers)
		_, span := tracer.Start(prop.Extract(detached, headers), name, trace.WithSpanKind(trace.SpanKindConsumer))
		ps.byMsg[msgPos{km.Partition, km.Offset}] = span
		ps.order[i] = span
		if !span.IsRecording() {
			continue // attributes are built for recorded spans only
		}
		span.SetAttributes(
			semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(km.Topic),
			semconv.MessagingDestinationPartitionID(strconv.FormatInt(int64(km.Partition), 10)),
			semconv.MessagingKafkaOffset(int(km.Offset)),
			semconv.MessagingConsumerGroupName(r.cfg.Group),
		)
		if len(kms) > 1 {
			span.SetAttributes(semconv.MessagingBatchMessageCount(len(kms)))
		}
		if id := headers.Get(HeaderID); id != "" {
			span.SetAttributes(semconv.MessagingMessageID(id), semconv.CloudEventsEventID(id))
		}
		if typ := headers.Get(HeaderType); typ != "" {
			span.SetAttributes(semconv.CloudEventsEventType(typ))
		}
		if len(km.Key) > 0 {
			span.SetAttributes(semconv.MessagingKafkaMessageKey(string(km.Key)))
		}
	}
	return context.WithValue(ctx, processSpansKey{}, ps), ps
}

// MessageContext returns ctx with msg's process span as the current span,
// when ctx carries one for it; otherwise ctx. A Handler's ctx already has
// its message's span; a BatchHandler uses this to trace its work per message.
func MessageContext(ctx context.Context, msg Message) context.Context {
	ps, ok := ctx.Value(processSpansKey{}).(*processSpans)
	if !ok || msg.Topic != ps.topic {
		return ctx
	}
	if span, ok := ps.byMsg[msgPos{msg.Partition, msg.Offset}]; ok {
		return trace.ContextWithSpan(ctx, span)
	}
	return ctx
}

// end records each message's outcome (outcomes[i] is the i-th message's;
// nil when err cut the handling short) and ends the spans.
func (ps *processSpans) end(outcomes []Outcome, err error) {
	for i, span := range ps.order {
		switch {
		case err != nil || i >= len(outcomes):
			span.SetStatus(codes.Error, "processing cut short")
			if err != nil {
				span.RecordError(err)
			}
		default:
			endOutcome(span, outcomes[i])
		}
		span.End()
	}
}

// endOutcome records outcome on span. A duplicate is an event on the span
// too, so that a redelivery skipped by the inbox stands out in a trace.
func endOutcome(span trace.Span, outcome Outcome) {
	span.SetAttributes(AttrOutcome.String(string(outcome)))
	switch outcome {
	case Duplicate:
		span.AddEvent("inbox: duplicate skipped")
	case Parked:
		span.AddEvent("inbox: parked until the aggregate's earlier events are applied")
	case DeadLettered:
		span.SetStatus(codes.Error, "dead-lettered")
	}
}

// traceDrained starts the span of a parked event applied by drain: a
// "process <topic>" CONSUMER span, child of the trace context stored with
// the event's headers.
func traceDrained(ctx context.Context, msg Message) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(msg.Topic),
		semconv.MessagingDestinationPartitionID(strconv.FormatInt(int64(msg.Partition), 10)),
		semconv.MessagingKafkaOffset(int(msg.Offset)),
		semconv.MessagingMessageID(msg.ID.String()),
		semconv.CloudEventsEventID(msg.ID.String()),
		semconv.CloudEventsEventType(msg.Type),
		AttrDrained.Bool(true),
	}
	parent := otel.GetTextMapPropagator().Extract(trace.ContextWithSpanContext(ctx, trace.SpanContext{}),
		propagation.MapCarrier(msg.Headers))
	return otel.Tracer(TracerName).Start(parent, "process "+msg.Topic,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
}

// endDrained records the result of applying a parked event and ends span.
func endDrained(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "applying the parked event failed")
	} else {
		span.SetAttributes(AttrOutcome.String(string(Processed)))
	}
	span.End()
}

// headerCarrier reads Kafka record headers as a TextMapCarrier (read only:
// the inbox never writes trace context).
type headerCarrier []*sarama.RecordHeader

func (c headerCarrier) Get(key string) string {
	for _, h := range c {
		if h != nil && string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}

func (headerCarrier) Set(string, string) {}

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for _, h := range c {
		if h != nil {
			keys = append(keys, string(h.Key))
		}
	}
	return keys
}
