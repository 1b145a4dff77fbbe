package orderapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
)

// Source is the CloudEvents source of the events this service emits.
const Source = "/paylab/orders"

// Publisher sends messages to Kafka and returns when the broker has
// acknowledged all of them. Only the naive modes use one.
type Publisher interface {
	Publish(ctx context.Context, msgs []*sarama.ProducerMessage) error
}

// Config configures a Service. Pool and Topic are required; Publisher is
// required in the naive modes.
type Config struct {
	Pool *pgxpool.Pool
	// Mode defaults to ModeOutbox.
	Mode Mode
	// Topic is the Kafka topic of the order events.
	Topic string
	// Publisher publishes events in the naive modes.
	Publisher Publisher
	// Notifier, when set, wakes the relays after each commit in outbox
	// mode, and the transactions send no NOTIFY of their own
	// (outbox.Config.NotifyAfterCommit). Nil: a NOTIFY in each transaction.
	Notifier *outbox.Notifier
	Hooks    Hooks
	// AcquireTimeout bounds the wait for a pooled connection: when every
	// connection is busy (a stuck database), a call fails with
	// order.ErrUnavailable after it instead of queueing. Default 2 s.
	AcquireTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the service's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Service places, captures and refunds orders.
type Service struct {
	pool   *pgxpool.Pool
	outbox *outbox.Writer
	notify *outbox.Notifier
	mode   Mode
	write  strategy // the mode's (strategy.go)
	topic  string
	pub    Publisher
	hooks  Hooks
	log    *slog.Logger
	// acquireTimeout is Config.AcquireTimeout.
	acquireTimeout time.Duration
	naiveC         *prometheus.CounterVec
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeOutbox
	}
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return nil, err
	}
	switch {
	case cfg.Pool == nil:
		return nil, errors.New("orderapp: a database pool is required")
	case cfg.Topic == "":
		return nil, errors.New("orderapp: a topic is required")
	case cfg.Mode.naive() && cfg.Publisher == nil:
		return nil, fmt.Errorf("orderapp: mode %s needs a publisher", cfg.Mode)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AcquireTimeout <= 0 {
		cfg.AcquireTimeout = DefaultAcquireTimeout
	}
	w, err := outbox.NewWriter(outbox.Config{NotifyAfterCommit: cfg.Notifier != nil})
	if err != nil {
		return nil, err
	}
	s := &Service{
		pool: cfg.Pool, outbox: w, notify: cfg.Notifier, mode: cfg.Mode, topic: cfg.Topic, pub: cfg.Publisher, hooks: cfg.Hooks, log: cfg.Logger,
		acquireTimeout: cfg.AcquireTimeout,
		naiveC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paylab_orders_naive_publish_total",
			Help: "Events the naive modes tried to publish straight to Kafka, by result (published, failed, skipped).",
		}, []string{"result"}),
	}
	s.write = s.newStrategy()
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.naiveC); err != nil {
			return nil, fmt.Errorf("orderapp: registering metrics: %w", err)
		}
	}
	return s, nil
}
