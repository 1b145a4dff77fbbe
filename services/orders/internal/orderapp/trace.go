package orderapp

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylab/paylab/pkg/outbox"
)

// TracerName is the instrumentation scope of the service's spans.
const TracerName = "github.com/paylab/paylab/services/orders/internal/orderapp"

// startTx starts the span of a state change's transaction ("orders tx
// capture"), a child of the request's span in ctx. The events the change
// stores carry this span's context (traceContext), so the trace continues
// from the transaction that decided them.
func (s *Service) startTx(ctx context.Context, op Op) (context.Context, trace.Span) {
	return otel.Tracer(TracerName).Start(ctx, "orders tx "+string(op), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			semconv.DBSystemNamePostgreSQL,
			attribute.String("orders.op", string(op)),
			attribute.String("orders.mode", string(s.mode)),
		))
}

// endTx records the outcome of the transaction on its span and ends it.
func endTx(span trace.Span, events int, replayed bool, err error) {
	span.SetAttributes(attribute.Int("orders.events", events), attribute.Bool("orders.idempotency_replayed", replayed))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "transaction failed")
	}
	span.End()
}

// traceContext returns the trace context of the span in ctx as headers to
// store with an event (W3C traceparent and tracestate, through the global
// propagator); nil when there is none.
func traceContext(ctx context.Context) map[string]string {
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

// orderSpanAttributes names the order a transaction changed on its span.
func orderSpanAttributes(ctx context.Context, events []outbox.Event) {
	if len(events) > 0 {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("orders.order_id", events[0].AggregateID))
	}
}
