// Package telemetry sets up OpenTelemetry tracing for a paylab process and
// carries W3C trace context through Kafka headers, so one payment is one
// trace: HTTP request → outbox row → relay → Kafka → each consumer.
//
// The exporter is configured by the standard OTEL_* variables
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_BSP_SCHEDULE_DELAY, …). When no
// endpoint is set, tracing costs next to nothing: spans are not recorded, but
// trace context is still propagated, so a caller's traceparent still reaches
// the outbox row and the Kafka message.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// The metric prefixes of paylab's outbox relays and inbox consumers
// (outbox.Config.MetricPrefix, inbox.Config.MetricPrefix): the dashboards
// and alert rules (deploy/) use them.
const (
	OutboxMetricPrefix = "paylab_outbox"
	InboxMetricPrefix  = "paylab_inbox"
)

// ShutdownTimeout bounds the flush of the spans still buffered at exit.
const ShutdownTimeout = 5 * time.Second

// Propagator is the propagator every paylab process installs: W3C trace
// context (traceparent, tracestate) and baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Setup installs the global propagator and, when an OTLP endpoint is
// configured, a global tracer provider exporting over OTLP/HTTP in batches.
// service is the service.name unless OTEL_SERVICE_NAME says otherwise. The
// returned function flushes and stops the provider; call it on shutdown
// (Stop does, with a timeout).
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(Propagator())
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return func(context.Context) error { return nil }, nil
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	// Later options win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the name given here, as the OpenTelemetry specification asks.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// Stop runs shutdown (as returned by Setup) within ShutdownTimeout, on a
// context of its own so that it works after the process's context ended. A
// failure to flush is logged: it loses spans, not work.
func Stop(log *slog.Logger, shutdown func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		log.WarnContext(ctx, "flushing traces at shutdown", "error", err)
	}
}
