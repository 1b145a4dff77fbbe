package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/paylab/paylab/internal/admin"
	"github.com/paylab/paylab/internal/broker"
	"github.com/paylab/paylab/internal/chaos"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/services/notifications/internal/mailer"
	"github.com/paylab/paylab/services/notifications/internal/receipt"
)

// FaultAfterMarkBeforeOffsetCommit is the step boundary after the receipt's
// record and the inbox mark committed, before the Kafka offset is marked.
const FaultAfterMarkBeforeOffsetCommit = "notifications.after_mark_before_offset_commit"

// faultFunc is called at named step boundaries; a chaos controller or a test
// wires it to crash, fail or delay. nil: no-op.
type faultFunc func(ctx context.Context, point string)

type app struct {
	cfg    config
	log    *slog.Logger
	pool   *pgxpool.Pool
	runner *inbox.Runner
	reg    *prometheus.Registry
}

func notifier(cfg config, fault faultFunc) *receipt.Notifier {
	return &receipt.Notifier{
		Sender: &mailer.SMTP{Addr: cfg.SMTPAddr, Timeout: cfg.SMTPTimeout},
		From:   cfg.MailFrom,
		Fault:  fault,
	}
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
		Handlers:        notifier(cfg, fault).Handlers(),
		Disabled:        !cfg.InboxEnabled,
		// One message per transaction: a receipt leaves by SMTP before its
		// transaction commits, so a failed batch retried message by message
		// would send the batch's earlier receipts again.
		BatchSize:   1,
		MaxAttempts: cfg.InboxMaxAttempts,
		// An unreachable SMTP server is retried for about half a minute
		// before the receipt is dead-lettered.
		MaxRetryBackoff: 10 * time.Second,
		Retention:       cfg.InboxRetention,
		HandlerTimeout:  cfg.SMTPTimeout + 5*time.Second,
		Sarama:          broker.Config("notifications"),
		ProducerSarama:  broker.ProducerConfig("notifications"),
		Logger:          log,
		Registerer:      reg,
		AfterCommit: func(ctx context.Context, _ inbox.Message, outcome inbox.Outcome) {
			if fault != nil && outcome == inbox.Processed {
				fault(ctx, FaultAfterMarkBeforeOffsetCommit)
			}
		},
	})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &app{cfg: cfg, log: log, pool: pool, runner: runner, reg: reg}, nil
}

// serve runs the service on the configured admin address until ctx ends.
func serve(ctx context.Context, cfg config, log *slog.Logger, fault faultFunc) error {
	a, err := newApp(ctx, cfg, log, fault)
	if err != nil {
		return err
	}
	defer a.pool.Close()
	adminLn, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("listening on ADMIN_ADDR %s: %w", cfg.AdminAddr, err)
	}
	return a.run(ctx, adminLn)
}

// run consumes and serves the admin listener until ctx ends, then shuts down
// with a deadline.
func (a *app) run(ctx context.Context, adminLn net.Listener) error {
	adminRoutes := admin.Handler(a.reg, map[string]admin.Check{
		"database": func(ctx context.Context) error { return a.pool.Ping(ctx) },
		"kafka": func(context.Context) error {
			if !a.runner.Ready() {
				return errors.New("not yet a member of the consumer group")
			}
			return nil
		},
		"smtp": func(ctx context.Context) error {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", a.cfg.SMTPAddr)
			if err != nil {
				return err
			}
			return c.Close()
		},
	})
	if err := chaos.Mount(adminRoutes, chaos.Default, a.cfg.ChaosEnabled, a.cfg.ChaosToken); err != nil {
		return err
	}
	srv := admin.Server("", adminRoutes)
	a.log.InfoContext(ctx, "notifications starting", "admin_addr", adminLn.Addr().String(), "smtp_addr", a.cfg.SMTPAddr,
		"topic", a.cfg.OrdersTopic, "group", a.cfg.ConsumerGroup, "inbox_enabled", a.cfg.InboxEnabled)

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.runner.Run(ctx) })
	g.Go(func() error {
		if err := srv.Serve(adminLn); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	err := g.Wait()
	a.log.Info("notifications stopped", "error", err)
	return err
}
