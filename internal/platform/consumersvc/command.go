package consumersvc

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/google/uuid"

	"github.com/paylab/paylab/internal/platform/dbpool"
	"github.com/paylab/paylab/internal/platform/telemetry"
	"github.com/paylab/paylab/pkg/inbox"
)

// Setup returns the process's JSON logger, every line tagged with the
// service, and starts tracing (exported over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set, see package telemetry). Call stop on
// exit: it flushes the spans still buffered, within a timeout.
func Setup(ctx context.Context, service string, level slog.Level) (log *slog.Logger, stop func(), err error) {
	log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("service", service)
	shutdown, err := telemetry.Setup(ctx, service)
	if err != nil {
		return nil, nil, err
	}
	return log, func() { telemetry.Stop(log, shutdown) }, nil
}

// Redrive re-processes one event the inbox marked failed (an operator
// command) with the given handlers, and prints the outcome.
func Redrive(ctx context.Context, databaseURL string, log *slog.Logger, handlers map[string]inbox.Handler, arg string) error {
	id, err := uuid.Parse(arg)
	if err != nil {
		return fmt.Errorf("event id %q: %w", arg, err)
	}
	pool, err := dbpool.New(ctx, databaseURL, nil)
	if err != nil {
		return fmt.Errorf("opening the database: %w", err)
	}
	defer pool.Close()
	outcome, err := inbox.Redrive(ctx, pool, inbox.Config{Handlers: handlers, Logger: log}, id)
	if err != nil {
		return fmt.Errorf("re-driving %s: %w", id, err)
	}
	fmt.Printf("event %s: %s\n", id, outcome)
	return nil
}
