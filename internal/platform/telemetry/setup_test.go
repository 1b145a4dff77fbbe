package telemetry_test

import (
	"context"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paylab/paylab/internal/platform/telemetry"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// With an OTLP endpoint set, Setup exports the process's spans there under
// its service name, which OTEL_SERVICE_NAME overrides; Stop flushes them.
func TestSetupExportsToTheOTLPEndpoint(t *testing.T) {
	for _, tc := range []struct{ name, envName, want string }{
		{"built-in name", "", "ledger"},
		{"OTEL_SERVICE_NAME wins", "ledger-eu", "ledger-eu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			collector := testenv.StartOTLP(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.Endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			t.Setenv("OTEL_SERVICE_NAME", tc.envName)
			t.Cleanup(func() {
				otel.SetTracerProvider(noop.NewTracerProvider())
				otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
			})
			shutdown, err := telemetry.Setup(context.Background(), "ledger")
			if err != nil {
				t.Fatal(err)
			}
			_, span := otel.Tracer("test").Start(context.Background(), "work")
			span.End()
			if got := collector.Spans(); len(got) != 0 {
				t.Fatalf("exported before the flush: %v", got)
			}
			telemetry.Stop(slog.New(slog.DiscardHandler), shutdown)
			got := collector.Spans()
			if len(got) != 1 || got[0].Name != "work" || got[0].Service != tc.want {
				t.Fatalf("exported %v, want one span \"work\" of service %s", got, tc.want)
			}
		})
	}
}

// Without an endpoint nothing is recorded, but the W3C propagator is
// installed: trace context still travels.
func TestSetupWithoutEndpointPropagatesOnly(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	if _, err := telemetry.Setup(context.Background(), "orders"); err != nil {
		t.Fatal(err)
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	ctx, span := otel.Tracer("test").Start(ctx, "work")
	defer span.End()
	if span.IsRecording() {
		t.Error("a span is recorded without an endpoint")
	}
	out := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, out)
	if out["traceparent"] != tp {
		t.Fatalf("propagated %v, want traceparent %s", out, tp)
	}
}
