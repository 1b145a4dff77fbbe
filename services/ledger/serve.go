package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/paylab/paylab/internal/admin"
	"github.com/paylab/paylab/internal/broker"
	"github.com/paylab/paylab/internal/chaos"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/services/ledger/internal/ledger"
	"github.com/paylab/paylab/services/ledger/internal/ledgerhttp"
)

// faultFunc is called at named step boundaries (ledger.Fault… points); a
// chaos controller or a test wires it to crash, fail or delay. nil: no-op.
type faultFunc func(ctx context.Context, point string)

// app is the ledger process: the inbox runner, the read API and the admin
// listener.
type app struct {
	cfg    config
	log    *slog.Logger
	pool   *pgxpool.Pool
	runner *inbox.Runner
	reg    *prometheus.Registry
}

func newApp(ctx context.Context, cfg config, log *slog.Logger, fault faultFunc) (*app, error) {
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("opening the database: %w", err)
	}
	reg := prometheus.NewRegistry()
	runner, err := inbox.NewRunner(pool, inbox.Config{
		Brokers:         broker.SplitBrokers(cfg.KafkaBrokers),
		Topic:           cfg.OrdersTopic,
		Group:           cfg.ConsumerGroup,
		DeadLetterTopic: cfg.DeadLetterTopic,
		Handlers:        ledger.Handlers(),
		BatchHandler:    applyWithFault(fault),
		Disabled:        !cfg.InboxEnabled,
		MaxAttempts:     cfg.InboxMaxAttempts,
		BatchSize:       cfg.InboxBatchSize,
		Retention:       cfg.InboxRetention,
		Sarama:          broker.Config("ledger"),
		ProducerSarama:  broker.ProducerConfig("ledger"),
		Logger:          log,
		Registerer:      reg,
		AfterCommit: func(ctx context.Context, _ inbox.Message, outcome inbox.Outcome) {
			if fault != nil && outcome == inbox.Processed {
				fault(ctx, ledger.FaultAfterApplyBeforeOffsetCommit)
			}
		},
	})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &app{cfg: cfg, log: log, pool: pool, runner: runner, reg: reg}, nil
}

// applyWithFault is ledger.Apply followed by the fault point between a
// batch's writes and its commit.
func applyWithFault(fault faultFunc) inbox.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, msgs []inbox.Message) error {
		if err := ledger.Apply(ctx, tx, msgs); err != nil {
			return err
		}
		if fault != nil {
			fault(ctx, ledger.FaultAfterApplyBeforeCommit)
		}
		return nil
	}
}

// serve runs the ledger on the configured addresses until ctx ends.
func serve(ctx context.Context, cfg config, log *slog.Logger, fault faultFunc) error {
	a, err := newApp(ctx, cfg, log, fault)
	if err != nil {
		return err
	}
	defer a.pool.Close()
	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listening on HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
	}
	adminLn, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		httpLn.Close()
		return fmt.Errorf("listening on ADMIN_ADDR %s: %w", cfg.AdminAddr, err)
	}
	return a.run(ctx, httpLn, adminLn)
}

// run serves on the given listeners until ctx ends, then shuts down with a
// deadline.
func (a *app) run(ctx context.Context, httpLn, adminLn net.Listener) error {
	adminRoutes := admin.Handler(a.reg, map[string]admin.Check{
		"database": func(ctx context.Context) error { return a.pool.Ping(ctx) },
		"kafka": func(context.Context) error {
			if !a.runner.Ready() {
				return errors.New("not yet a member of the consumer group")
			}
			return nil
		},
	})
	if err := chaos.Mount(adminRoutes, chaos.Default, a.cfg.ChaosEnabled, a.cfg.ChaosToken); err != nil {
		return err
	}
	adminSrv := admin.Server("", adminRoutes)
	apiSrv := admin.Server("", ledgerhttp.Routes(a.pool, a.log))
	a.log.InfoContext(ctx, "ledger starting", "http_addr", httpLn.Addr().String(), "admin_addr", adminLn.Addr().String(),
		"topic", a.cfg.OrdersTopic, "group", a.cfg.ConsumerGroup, "inbox_enabled", a.cfg.InboxEnabled)

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.runner.Run(ctx) })
	for _, s := range []struct {
		srv *http.Server
		ln  net.Listener
	}{{apiSrv, httpLn}, {adminSrv, adminLn}} {
		g.Go(func() error {
			if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		g.Go(func() error {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return s.srv.Shutdown(sctx)
		})
	}
	err := g.Wait()
	a.log.Info("ledger stopped", "error", err)
	return err
}
