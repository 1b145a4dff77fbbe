// Package relaycmd runs the outbox relay as its own process: `orders relay`.
// Any number of relay processes may run against one orders database, each
// with its own RELAY_ID: a process started with the ID of a running relay
// exits at once with status 1. In the default mode (RELAY_MODE=poll) they
// share the work through leases; with RELAY_MODE=wal one of them streams
// the outbox's inserts from a logical replication slot and the others
// stand by (package outbox, "The WAL relay").
//
// The two modes never run at once. A WAL relay started while polling
// relays run waits for them to stop, not ready (/readyz), and then
// creates the slot and the publication if they do not exist (the database
// role must own the outbox table and have the REPLICATION attribute, and
// PostgreSQL must run with wal_level=logical) and hands over what they
// left pending: switching a deployment to wal is a rolling restart. A
// polling relay started while a WAL relay runs exits with status 1 (a
// restart policy starts it again until the WAL relays are gone); once it
// runs, it drops the slots WAL relays streamed the table from, which
// nothing reads any more (outbox.DropWAL drops the publication too).
//
// Environment (defaults in parentheses; the relay's own settings map onto
// outbox.RelayConfig or outbox.WALConfig, whose defaults and validation
// they take when unset):
//
//	DATABASE_URL              orders database, as the relays' role (postgres://orders_relay:orders_relay@127.0.0.1:55432/orders?sslmode=disable)
//	KAFKA_BROKERS             comma-separated bootstrap brokers (127.0.0.1:59092)
//	ADMIN_ADDR                admin listener: /healthz, /readyz, /metrics, /chaos (127.0.0.1:9081)
//	RELAY_MODE                poll (claim with leases) or wal (stream a replication slot) (poll)
//	RELAY_REPLICATION_URL     wal: the replication stream's connection string (DATABASE_URL)
//	RELAY_SLOT                wal: Slot, the replication slot, unique per server (outbox_wal_relay)
//	RELAY_PUBLICATION         wal: Publication, of the outbox's inserts (outbox_wal)
//	RELAY_STANDBY_GUARD       wal: StandbyGuard, publish a transaction only once the synchronous standbys have it: auto (while there are any), on, off (auto)
//	RELAY_ID                  ID, the lease owner name, unique per running relay, enforced (hostname-pid)
//	RELAY_BATCH_SIZE          BatchSize: events per claim (2000), or per published batch in wal mode (5000)
//	RELAY_LEASE_TTL           LeaseTTL: lease of a claimed batch or of the WAL reader; takeover time after a crash (30s)
//	RELAY_POLL_INTERVAL       PollInterval: polling fallback to LISTEN/NOTIFY (1s)
//	RELAY_ROUND_INTERVAL      RoundInterval: poll: shortest time between two claims unless a batch was full; negative = none (20ms)
//	RELAY_RETRY_BACKOFF       RetryBackoff: first retry delay after a broker error, doubling (1s)
//	RELAY_RETRY_MAX_BACKOFF   RetryMaxBackoff: retry delay cap (1m)
//	RELAY_OUTAGE_MAX_BACKOFF  OutageMaxBackoff: pause cap while the broker is down, i.e. a whole batch failed (5s)
//	RELAY_MAX_ATTEMPTS        MaxAttempts: park an event after this many failed attempts, outages not counted; negative = never (100)
//	OUTBOX_RETENTION          Retention: delete dispatched events older than this; negative = keep all (168h)
//	RELAY_DELETE_DISPATCHED   poll: DeleteDispatched, delete each published event instead of setting dispatched_at; no history kept (false)
//	RELAY_RETENTION_INTERVAL  RetentionInterval: how often retention runs (1m)
//	RELAY_STATS_INTERVAL      StatsInterval: how often the pending gauges are refreshed (5s)
//	RELAY_SHUTDOWN_TIMEOUT    admin listener shutdown deadline (20s)
//	RELAY_LEASE_FENCING       false: Unsafe.UnfencedComplete, record outcomes of rows whose lease moved on; only to show the zombie case (true)
//	CHAOS_ENABLED             mount /chaos/faults and /chaos/kill (false)
//	CHAOS_TOKEN               bearer token for /chaos, at least 16 characters (none)
//	ADMIN_PPROF               true: Go's profiles on the admin listener, /debug/pprof/ (false)
//	OTEL_EXPORTER_OTLP_ENDPOINT  export traces over OTLP/HTTP (unset: none); OTEL_* apply
//
// On SIGTERM the batch in flight is finished (within its publish budget,
// renewing its lease while acknowledgements are pending), the producer
// flushed and the admin listener closed.
package relaycmd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/platform/dbpool"
	"github.com/paylab/paylab/internal/platform/process"
	"github.com/paylab/paylab/pkg/outbox"
)

// Source is the CloudEvents source of the orders service's events.
const Source = "/paylab/orders"

// Run runs one relay until ctx ends, then shuts down within
// RELAY_SHUTDOWN_TIMEOUT: the batch in flight is finished, the producer
// flushed, the admin listener closed.
func Run(ctx context.Context, log *slog.Logger) error {
	cfg, err := LoadConfig(nil)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "starting orders relay", "config", cfg)

	pool, err := dbpool.New(ctx, cfg.DatabaseURL, nil)
	if err != nil {
		return fmt.Errorf("opening the orders database: %w", err)
	}
	defer pool.Close()

	client, err := connectKafka(ctx, log, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	producer, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		return fmt.Errorf("creating the Kafka producer: %w", err)
	}
	pub := outbox.NewKafkaPublisher(producer, Source)
	defer pub.Close()

	reg := prometheus.NewRegistry()
	checks := map[string]admin.Check{
		"database": admin.Writable(pool),
		"kafka":    kafkaCheck(client),
	}
	var runRelay func(context.Context) error
	switch cfg.Mode {
	case ModeWAL:
		// Run sets the slot up (outbox.SetupWAL) once no polling relay runs.
		rcfg := cfg.WALConfig(log)
		rcfg.Registerer = reg
		relay, err := outbox.NewWALRelay(pool, cfg.replicationURL(), pub, rcfg)
		if err != nil {
			return err
		}
		runRelay = relay.Run
		checks["wal reader"] = relay.Ready
	default:
		rcfg := cfg.RelayConfig(log)
		rcfg.Registerer = reg
		relay, err := outbox.NewRelay(pool, pub, rcfg)
		if err != nil {
			return err
		}
		runRelay = relay.Run
	}

	router := admin.Handler(reg, checks)
	admin.MountProfiling(router, cfg.Profiling)
	if err := chaos.Mount(router, chaos.Default, cfg.ChaosEnabled, cfg.ChaosToken); err != nil {
		return err
	}
	srv := admin.Server(cfg.AdminAddr, router)
	ln, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("listening on ADMIN_ADDR %s: %w", cfg.AdminAddr, err)
	}
	log.InfoContext(ctx, "admin listener ready", "addr", ln.Addr().String(), "chaos_enabled", cfg.ChaosEnabled)

	g := process.Group{ShutdownTimeout: cfg.ShutdownTimeout}
	g.Serve("the admin listener", srv, ln)
	g.Go(runRelay)
	return g.Run(ctx, log)
}

// connectKafka connects to the brokers, retrying until they answer or ctx
// ends: a relay started while Kafka is down waits for it.
func connectKafka(ctx context.Context, log *slog.Logger, cfg Config) (sarama.Client, error) {
	kcfg := broker.RelayProducerConfig("paylab-orders-relay", cfg.leaseTTL())
	backoff := 500 * time.Millisecond
	for {
		client, err := sarama.NewClient(broker.SplitBrokers(cfg.KafkaBrokers), kcfg)
		if err == nil {
			return client, nil
		}
		log.WarnContext(ctx, "Kafka not reachable; retrying", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to KAFKA_BROKERS %s: %w", cfg.KafkaBrokers, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// kafkaCheck reports whether the brokers answer a metadata request.
func kafkaCheck(client sarama.Client) admin.Check {
	return func(ctx context.Context) error {
		done := make(chan error, 1)
		go func() { done <- client.RefreshMetadata() }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
