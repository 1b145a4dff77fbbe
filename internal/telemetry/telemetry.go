// Package telemetry sets up OpenTelemetry tracing for a paylab process and
// carries W3C trace context through Kafka headers, so one payment is one
// trace: HTTP request → outbox row → relay → Kafka → each consumer.
//
// The exporter is configured by the standard OTEL_* variables
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, …). When no endpoint is set,
// tracing costs nothing: spans are not recorded, but trace context is still
// propagated, so a caller's traceparent still reaches the outbox row.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// Setup installs the global propagator (W3C trace context and baggage) and,
// when an OTLP endpoint is configured, a tracer provider exporting over
// OTLP/HTTP. The returned function flushes and stops it; call it on shutdown.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return func(context.Context) error { return nil }, nil
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := NewProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// NewProvider returns a tracer provider honouring OTEL_TRACES_SAMPLER (the
// SDK default: parent-based, always on). Tests pass an in-memory exporter.
func NewProvider(opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(opts...)
}
