// Package apiserver runs the orders API process: the public HTTP listener,
// the admin listener (/healthz, /readyz, /metrics, /docs) and the idempotency-key
// pruner, with a graceful shutdown.
package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/api/apidocs"
	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/platform/dbpool"
	"github.com/paylab/paylab/internal/platform/process"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/orders/internal/config"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
	"github.com/paylab/paylab/services/orders/internal/orderhttp"
	"github.com/paylab/paylab/services/orders/internal/syncpub"
)

// Options are the process's optional collaborators.
type Options struct {
	// Hooks are called at the step boundaries of every state change; when
	// none is set, the chaos fault points of the same names are (a no-op
	// until a fault is armed over the admin listener).
	Hooks orderapp.Hooks
	// OnListen, when set, is called with the bound addresses of the public
	// and admin listeners once both listen (useful with port 0).
	OnListen func(api, admin net.Addr)
}

// Run serves the orders API until ctx ends, then shuts down within
// cfg.ShutdownTimeout: the listeners stop accepting, in-flight requests
// finish, and the pool closes.
func Run(ctx context.Context, cfg config.API, log *slog.Logger, opts Options) error {
	log.InfoContext(ctx, "starting orders API", "config", cfg)
	poolCfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("parsing DATABASE_URL: %w", err)
	}
	poolCfg.MaxConns = cfg.DatabaseMaxConns
	dbpool.Configure(poolCfg)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fmt.Errorf("opening database pool: %w", err)
	}
	defer pool.Close()

	reg := prometheus.NewRegistry()
	var pub orderapp.Publisher
	if cfg.Mode() != orderapp.ModeOutbox {
		p := syncpub.New(broker.SplitBrokers(cfg.KafkaBrokers), "paylab-orders")
		defer p.Close()
		pub = p
		log.WarnContext(ctx, "OUTBOX_MODE is naive: events are published straight to Kafka and CAN BE LOST OR PHANTOM; this mode exists only to demonstrate the dual-write hole",
			"mode", cfg.OutboxMode)
	}
	hooks := opts.Hooks
	if hooks.BeforeCommit == nil && hooks.AfterCommitBeforePublish == nil && hooks.AfterPublishBeforeCommit == nil {
		hooks = faultHooks()
	}
	// The relays are woken after commit, not by a NOTIFY inside each
	// payment transaction (outbox.Config.NotifyAfterCommit).
	notifier, err := outbox.NewNotifier(pool.Config().ConnConfig, outbox.Config{NotifyAfterCommit: true}, log)
	if err != nil {
		return err
	}
	app, err := orderapp.New(orderapp.Config{
		Pool: pool, Mode: cfg.Mode(), Topic: cfg.OrdersTopic, Publisher: pub, Notifier: notifier,
		Hooks: hooks, AcquireTimeout: cfg.DatabaseAcquireTimeout, Logger: log, Registerer: reg,
	})
	if err != nil {
		return err
	}
	metrics, err := orderhttp.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}

	sec := orderhttp.Security{
		Keys: apikey.NewAuthenticator(pool, apikey.AuthConfig{
			TTL: cfg.APIKeyCacheTTL, LookupTimeout: cfg.DatabaseAcquireTimeout + time.Second,
		}),
		Limiter:        apikey.NewLimiter(apikey.LimitConfig{Rate: cfg.APIRateLimit, Burst: cfg.APIRateBurst}),
		RequestTimeout: cfg.RequestTimeout,
	}
	apiSrv := publicServer(cfg.HTTPAddr, orderhttp.Routes(app, log, metrics, sec), log)
	adminRoutes := admin.Handler(reg, map[string]admin.Check{"database": admin.Writable(pool)})
	docs, err := apidocs.Handler()
	if err != nil {
		return err
	}
	adminRoutes.Get(apidocs.Route, docs)
	admin.MountProfiling(adminRoutes, cfg.Profiling)
	if err := chaos.Mount(adminRoutes, chaos.Default, cfg.ChaosEnabled, cfg.ChaosToken); err != nil {
		return err
	}
	adminSrv := admin.Server(cfg.AdminAddr, adminRoutes)
	apiLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listening on HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
	}
	adminLn, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		apiLn.Close()
		return fmt.Errorf("listening on ADMIN_ADDR %s: %w", cfg.AdminAddr, err)
	}
	log.InfoContext(ctx, "listening", "api", apiLn.Addr().String(), "admin", adminLn.Addr().String())
	if opts.OnListen != nil {
		opts.OnListen(apiLn.Addr(), adminLn.Addr())
	}

	// The public listener shuts down first: its in-flight requests still
	// need the database; the admin listener keeps answering probes meanwhile.
	g := process.Group{ShutdownTimeout: cfg.ShutdownTimeout}
	g.Serve("the API listener", apiSrv, apiLn)
	g.Serve("the admin listener", adminSrv, adminLn)
	g.Go(notifier.Run)
	g.Go(func(ctx context.Context) error {
		return app.RunPruner(ctx, cfg.IdempotencyPruneInterval, cfg.IdempotencyRetention)
	})
	return g.Run(ctx, log)
}

// publicServer is the public listener's server: the admin listener's
// timeouts, a longer keep-alive for clients that place payments back to
// back, a cap on header size, and net/http's own errors in the log.
func publicServer(addr string, h http.Handler, log *slog.Logger) *http.Server {
	s := admin.Server(addr, h)
	s.IdleTimeout = 90 * time.Second
	s.MaxHeaderBytes = 32 << 10
	s.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	return s
}
