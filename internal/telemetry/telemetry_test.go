package telemetry_test

import (
	"context"
	"testing"

	"github.com/IBM/sarama"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylab/paylab/internal/telemetry"
)

// Trace context survives a trip through an outbox row's header map and a
// Kafka message's headers: the consumer's span joins the producer's trace.
func TestTraceContextThroughKafkaHeaders(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	shutdown, err := telemetry.Setup(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())

	spans := tracetest.NewInMemoryExporter()
	tp := telemetry.NewProvider(sdktrace.WithSyncer(spans))
	tracer := tp.Tracer("test")

	ctx, request := tracer.Start(context.Background(), "POST /v1/payments")
	row := telemetry.MapCarrier{}
	telemetry.Inject(ctx, row) // stored with the outbox row
	request.End()
	if row["traceparent"] == "" {
		t.Fatal("no traceparent injected")
	}

	// The relay copies the row's headers onto the Kafka message.
	var headers []sarama.RecordHeader
	out := telemetry.HeaderCarrier{Headers: &headers}
	for k, v := range row {
		out.Set(k, v)
	}
	msg := &sarama.ConsumerMessage{}
	for i := range headers {
		msg.Headers = append(msg.Headers, &headers[i])
	}

	consumerCtx := telemetry.Extract(context.Background(), telemetry.ConsumerHeaders(msg))
	_, consume := tracer.Start(consumerCtx, "ledger apply", trace.WithSpanKind(trace.SpanKindConsumer))
	consume.End()

	got := spans.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans, want 2", len(got))
	}
	if got[0].SpanContext.TraceID() != got[1].SpanContext.TraceID() {
		t.Fatalf("consumer span in trace %s, request in %s", got[1].SpanContext.TraceID(), got[0].SpanContext.TraceID())
	}
	if got[1].Parent.SpanID() != got[0].SpanContext.SpanID() {
		t.Fatalf("consumer span's parent is %s, want the request span %s", got[1].Parent.SpanID(), got[0].SpanContext.SpanID())
	}
}
