package consumersvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/platform/dbpool"
	"github.com/paylab/paylab/internal/platform/process"
	"github.com/paylab/paylab/internal/platform/telemetry"
	"github.com/paylab/paylab/pkg/inbox"
)

// FaultFunc is called at named step boundaries; a chaos controller or a test
// wires it to crash, fail or delay. An error fails the step: the message's
// attempt fails as on a handler error (see inbox.Config.AfterCommit). nil:
// no-op.
type FaultFunc func(ctx context.Context, point string) error

// Spec is what a consumer adds to the shared skeleton.
type Spec struct {
	// Name names the process in logs, metrics client ids and errors.
	Name string
	// Inbox holds the service's own inbox settings (Handlers, BatchSize,
	// timeouts, back-off); the connection, topic, group, retention, metrics
	// and logging fields are filled from Config.
	Inbox inbox.Config
	// Fault, when set, is called with AfterCommitPoint after a message's
	// effects and inbox mark committed, before its offset is marked; an
	// error leaves the offset unmarked and the message is delivered again.
	Fault            FaultFunc
	AfterCommitPoint string
	// Checks are readiness checks beside "database" and "kafka".
	Checks map[string]admin.Check
}

// Service is one consumer process: its pool, inbox runner and metrics.
type Service struct {
	Config   Config
	Spec     Spec
	Log      *slog.Logger
	Pool     *pgxpool.Pool
	Runner   *inbox.Runner
	Registry *prometheus.Registry
}

// Open opens the database and builds the inbox runner. Close the pool when
// done (Service.Close).
func Open(ctx context.Context, cfg Config, log *slog.Logger, spec Spec) (*Service, error) {
	pool, err := dbpool.New(ctx, cfg.DatabaseURL, nil)
	if err != nil {
		return nil, fmt.Errorf("opening the database: %w", err)
	}
	reg := prometheus.NewRegistry()
	ic := spec.Inbox
	ic.Brokers = broker.SplitBrokers(cfg.KafkaBrokers)
	ic.Topic, ic.Group, ic.DeadLetterTopic = cfg.OrdersTopic, cfg.ConsumerGroup, cfg.DeadLetterTopic
	ic.Unsafe.Disabled = !cfg.InboxEnabled
	ic.MaxAttempts, ic.Retention = cfg.InboxMaxAttempts, cfg.InboxRetention
	if ic.Retention == 0 {
		ic.Retention = -1 // INBOX_RETENTION=0 keeps rows forever
	}
	ic.Sarama, ic.ProducerSarama = broker.Config(spec.Name), broker.ProducerConfig(spec.Name)
	ic.Logger, ic.Registerer, ic.MetricPrefix = log, reg, telemetry.InboxMetricPrefix
	if spec.Fault != nil && spec.AfterCommitPoint != "" {
		ic.AfterCommit = func(ctx context.Context, _ inbox.Message, outcome inbox.Outcome) error {
			if outcome != inbox.Processed {
				return nil
			}
			return spec.Fault(ctx, spec.AfterCommitPoint)
		}
	}
	runner, err := inbox.NewRunner(pool, ic)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &Service{Config: cfg, Spec: spec, Log: log, Pool: pool, Runner: runner, Registry: reg}, nil
}

// Close releases the database pool.
func (s *Service) Close() { s.Pool.Close() }

// Listener is an extra HTTP server of the process (the ledger's read API),
// on the address named by the variable Var.
type Listener struct {
	Var     string
	Addr    string
	Handler http.Handler
}

// Serve listens on the admin address and on each extra listener, then runs
// until ctx ends (see Run).
func (s *Service) Serve(ctx context.Context, extra ...Listener) error {
	all := append([]Listener{{Var: "ADMIN_ADDR", Addr: s.Config.AdminAddr}}, extra...)
	lns := make([]net.Listener, 0, len(all))
	defer func() {
		for _, ln := range lns {
			ln.Close() // a no-op once the servers closed them
		}
	}()
	for _, l := range all {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return fmt.Errorf("listening on %s %s: %w", l.Var, l.Addr, err)
		}
		lns = append(lns, ln)
	}
	servers := make([]Server, len(extra))
	for i, l := range extra {
		servers[i] = Server{Handler: l.Handler, Listener: lns[i+1]}
	}
	return s.Run(ctx, lns[0], servers...)
}

// Server is an HTTP handler served on a listener.
type Server struct {
	Handler  http.Handler
	Listener net.Listener
}

// Run consumes, serves the admin routes on adminLn (health checks, metrics,
// and the chaos controls when enabled) and each extra server until ctx
// ends, then shuts the servers down with a deadline.
func (s *Service) Run(ctx context.Context, adminLn net.Listener, extra ...Server) error {
	checks := map[string]admin.Check{
		"database": admin.Writable(s.Pool),
		"kafka": func(context.Context) error {
			if !s.Runner.Ready() {
				return errors.New("not yet a member of the consumer group")
			}
			return nil
		},
	}
	for name, c := range s.Spec.Checks {
		checks[name] = c
	}
	adminRoutes := admin.Handler(s.Registry, checks)
	admin.MountProfiling(adminRoutes, s.Config.Profiling)
	if err := chaos.Mount(adminRoutes, chaos.Default, s.Config.ChaosEnabled, s.Config.ChaosToken); err != nil {
		return err
	}
	attrs := []any{"admin_addr", adminLn.Addr().String(), "topic", s.Config.OrdersTopic,
		"group", s.Config.ConsumerGroup, "inbox_enabled", s.Config.InboxEnabled}
	for _, e := range extra {
		attrs = append(attrs, "http_addr", e.Listener.Addr().String())
	}
	s.Log.InfoContext(ctx, s.Spec.Name+" starting", append(attrs, "config", s.Config)...)

	// The extra (public) listeners shut down before the admin listener,
	// which keeps answering probes meanwhile.
	var g process.Group
	for _, e := range extra {
		g.Serve("the "+e.Listener.Addr().String()+" listener", admin.Server("", e.Handler), e.Listener)
	}
	g.Serve("the admin listener", admin.Server("", adminRoutes), adminLn)
	g.Go(s.Runner.Run)
	return g.Run(ctx, s.Log)
}
