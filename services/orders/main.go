// Command orders is the orders service of paylab.
//
//	orders [serve]   the payments API (public and admin listeners)
//	orders relay     the outbox relay: publishes committed events to Kafka
//
// Settings come from environment variables; services/orders/README.md lists
// them with their defaults. Traces are exported over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (service.name "orders" and
// "orders-relay" unless OTEL_SERVICE_NAME says otherwise).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/paylab/paylab/internal/platform/process"
	"github.com/paylab/paylab/internal/platform/telemetry"
	"github.com/paylab/paylab/services/orders/internal/apiserver"
	"github.com/paylab/paylab/services/orders/internal/config"
	"github.com/paylab/paylab/services/orders/internal/logctx"
	"github.com/paylab/paylab/services/orders/internal/relaycmd"
)

const usage = `orders: the orders service of paylab

usage: orders [command]

commands:
  serve   run the payments API (the default)
  relay   run the outbox relay

Settings come from the environment; see services/orders/README.md.
`

// errUsage makes process.Main print the usage and exit with status 2.
var errUsage = process.ErrUsage

func main() {
	process.Main("orders", usage, func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout) })
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	if len(args) > 1 {
		return errUsage
	}
	if cmd == "help" || cmd == "-h" || cmd == "--help" {
		fmt.Fprint(out, usage)
		return nil
	}
	levelText := os.Getenv("LOG_LEVEL")
	if levelText == "" {
		levelText = "info"
	}
	level, err := config.ParseLevel(levelText)
	if err != nil {
		return fmt.Errorf("configuration: LOG_LEVEL %q is not one of debug, info, warn, error", levelText)
	}
	log := slog.New(logctx.Handler(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level}))).
		With("service", "orders")

	switch cmd {
	case "serve":
		cfg, err := config.LoadAPI()
		if err != nil {
			return err
		}
		log = log.With("component", "api")
		stopTracing, err := telemetry.Setup(ctx, "orders")
		if err != nil {
			return err
		}
		defer telemetry.Stop(log, stopTracing)
		return apiserver.Run(ctx, cfg, log, apiserver.Options{})
	case "relay":
		log = log.With("component", "relay")
		stopTracing, err := telemetry.Setup(ctx, "orders-relay")
		if err != nil {
			return err
		}
		defer telemetry.Stop(log, stopTracing)
		return relaycmd.Run(ctx, log)
	default:
		return errUsage
	}
}
