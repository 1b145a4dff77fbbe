package orderapp_test

import (
	"testing"

	"go.opentelemetry.io/otel"
	"go.uber.org/goleak"

	"github.com/paylab/paylab/internal/platform/telemetry"
)

func TestMain(m *testing.M) {
	// The propagator the process installs (telemetry.Setup): events carry
	// the trace context of the call with it.
	otel.SetTextMapPropagator(telemetry.Propagator())
	goleak.VerifyTestMain(m,
		// sarama's metrics library starts a process-wide ticker once.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}
