// Command ledger consumes order events into a double-entry ledger and serves
// balances and journal entries.
//
//	ledger                    consume and serve (same as "ledger serve")
//	ledger redrive <event-id> re-process an event the inbox marked failed
//
// Configuration comes from environment variables (see config.go and
// internal/platform/consumersvc). Traces are exported over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set.
package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/platform/consumersvc"
	"github.com/paylab/paylab/internal/platform/process"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/services/ledger/internal/ledger"
	"github.com/paylab/paylab/services/ledger/internal/ledgerhttp"
)

func main() { process.Main("ledger", "", run) }

func run(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log, stop, err := consumersvc.Setup(ctx, "ledger", cfg.LogLevel)
	if err != nil {
		return err
	}
	defer stop()
	switch {
	case len(args) == 0 || args[0] == "serve":
		return serve(ctx, cfg, log, chaos.Points(ledger.FaultAfterApplyBeforeOffsetCommit, ledger.FaultAfterApplyBeforeCommit))
	case args[0] == "redrive" && len(args) == 2:
		return redrive(ctx, cfg, log, args[1])
	}
	return errors.New("usage: ledger [serve] | ledger redrive <event-id>")
}

// redrive re-processes one event the inbox marked failed (an operator
// command).
func redrive(ctx context.Context, cfg config, log *slog.Logger, eventID string) error {
	return consumersvc.Redrive(ctx, cfg.DatabaseURL, log, ledger.Handlers(), eventID)
}

// open builds the ledger's consumer: the journal handlers behind the inbox.
func open(ctx context.Context, cfg config, log *slog.Logger, fault consumersvc.FaultFunc) (*consumersvc.Service, error) {
	return consumersvc.Open(ctx, cfg.Config, log, consumersvc.Spec{
		Name: "ledger",
		Inbox: inbox.Config{
			Handlers:     ledger.Handlers(),
			BatchHandler: applyWithFault(fault),
			BatchSize:    cfg.InboxBatchSize,
		},
		Fault:            fault,
		AfterCommitPoint: ledger.FaultAfterApplyBeforeOffsetCommit,
	})
}

// applyWithFault is ledger.Apply followed by the fault point between a
// batch's writes and its commit; the point's error fails the batch, which is
// rolled back and retried.
func applyWithFault(fault consumersvc.FaultFunc) inbox.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, msgs []inbox.Message) error {
		if err := ledger.Apply(ctx, tx, msgs); err != nil {
			return err
		}
		if fault != nil {
			return fault(ctx, ledger.FaultAfterApplyBeforeCommit)
		}
		return nil
	}
}

// serve consumes and serves the read API and the admin listener until ctx
// ends.
func serve(ctx context.Context, cfg config, log *slog.Logger, fault consumersvc.FaultFunc) error {
	s, err := open(ctx, cfg, log, fault)
	if err != nil {
		return err
	}
	defer s.Close()
	sec := ledgerhttp.Security{
		// A key's lookup waits for a connection as a read does, and a
		// second for its query.
		Keys: apikey.NewAuthenticator(s.Pool, apikey.AuthConfig{TTL: cfg.APIKeyCacheTTL,
			LookupTimeout: cfg.DatabaseAcquireTimeout + time.Second}),
		Limiter:        apikey.NewLimiter(apikey.LimitConfig{Rate: cfg.APIRateLimit, Burst: cfg.APIRateBurst}),
		RequestTimeout: cfg.RequestTimeout,
		AcquireTimeout: cfg.DatabaseAcquireTimeout,
	}
	return s.Serve(ctx, consumersvc.Listener{Var: "HTTP_ADDR", Addr: cfg.HTTPAddr, Handler: ledgerhttp.Routes(s.Pool, log, sec)})
}
