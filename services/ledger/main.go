// Command ledger consumes order events into a double-entry ledger and serves
// balances and journal entries.
//
//	ledger                    consume and serve (same as "ledger serve")
//	ledger redrive <event-id> re-process an event the inbox marked failed
//
// Configuration comes from environment variables (see config.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/chaos"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/services/ledger/internal/ledger"
)

func main() {
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ledger:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).With("service", "ledger")
	switch {
	case len(args) == 0 || args[0] == "serve":
		return serve(ctx, cfg, log, chaos.Points(log, ledger.FaultAfterApplyBeforeOffsetCommit, ledger.FaultAfterApplyBeforeCommit))
	case args[0] == "redrive" && len(args) == 2:
		return redrive(ctx, cfg, log, args[1])
	}
	return errors.New("usage: ledger [serve] | ledger redrive <event-id>")
}

// redrive re-processes one failed event (an operator command).
func redrive(ctx context.Context, cfg config, log *slog.Logger, arg string) error {
	id, err := uuid.Parse(arg)
	if err != nil {
		return fmt.Errorf("event id %q: %w", arg, err)
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("opening the database: %w", err)
	}
	defer pool.Close()
	outcome, err := inbox.Redrive(ctx, pool, inbox.Config{Handlers: ledger.Handlers(), Logger: log}, id)
	if err != nil {
		return fmt.Errorf("re-driving %s: %w", id, err)
	}
	fmt.Printf("event %s: %s\n", id, outcome)
	return nil
}
