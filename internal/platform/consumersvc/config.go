// Package consumersvc is the process skeleton the event consumers (ledger,
// notifications) share: the configuration every inbox consumer has, the
// database pool and inbox runner, the admin listener with its health checks
// and chaos controls, the re-drive command, and shutdown with a deadline.
// What differs — handlers, batch size, extra listeners and checks — each
// service passes in.
package consumersvc

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/envconfig"
)

// Config is the configuration every consumer reads from the environment. A
// service embeds it in its own config struct and reads that with
// envconfig.Load from Defaults; DATABASE_URL, CONSUMER_GROUP and ADMIN_ADDR
// default per service.
type Config struct {
	DatabaseURL     string `env:"DATABASE_URL" redact:"password"`
	KafkaBrokers    string `env:"KAFKA_BROKERS" envDefault:"127.0.0.1:59092"`
	OrdersTopic     string `env:"ORDERS_TOPIC" envDefault:"order-events"`
	DeadLetterTopic string `env:"DEAD_LETTER_TOPIC" envDefault:"order-events.dlq"`
	ConsumerGroup   string `env:"CONSUMER_GROUP"`
	AdminAddr       string `env:"ADMIN_ADDR"`
	// InboxEnabled=false turns dedupe and ordering off: a demonstration of
	// what the inbox prevents, never for production.
	InboxEnabled bool `env:"INBOX_ENABLED" envDefault:"true"`
	// InboxRetention keeps processed inbox rows this long; it must exceed
	// Kafka's retention (the replay horizon). 0 keeps them forever.
	InboxRetention   time.Duration `env:"INBOX_RETENTION" envDefault:"168h"`
	InboxMaxAttempts int           `env:"INBOX_MAX_ATTEMPTS" envDefault:"5"`
	LogLevel         slog.Level    `env:"LOG_LEVEL" envDefault:"info"`
	// ChaosEnabled mounts the fault-injection controls (/chaos/…) on the
	// admin listener, guarded by the bearer token ChaosToken.
	ChaosEnabled bool   `env:"CHAOS_ENABLED" envDefault:"false"`
	ChaosToken   string `env:"CHAOS_TOKEN" redact:"value"`
	// Profiling serves Go's profiles on the admin listener (/debug/pprof/).
	Profiling bool `env:"ADMIN_PPROF" envDefault:"false"`
}

// Defaults is the configuration of the consumer named service before the
// environment is read: its own database as its runtime role (service_app,
// migrate.LedgerApp or migrate.NotificationsApp), its own consumer group,
// and adminAddr.
func Defaults(service, adminAddr string) Config {
	return Config{
		DatabaseURL:   fmt.Sprintf("postgres://%[1]s_app:%[1]s_app@127.0.0.1:55432/%[1]s?sslmode=disable", service),
		ConsumerGroup: service,
		AdminAddr:     adminAddr,
	}
}

// LogValue logs the configuration with the database password and the
// chaos token masked.
func (c Config) LogValue() slog.Value { return envconfig.LogValue(c) }

// Validate checks the shared settings and names the variable at fault.
func (c Config) Validate() error {
	switch {
	case c.ChaosEnabled && len(c.ChaosToken) < 16:
		return fmt.Errorf("configuration: CHAOS_TOKEN must be at least 16 characters when CHAOS_ENABLED=true")
	case c.DatabaseURL == "":
		return fmt.Errorf("configuration: DATABASE_URL is empty")
	case len(broker.SplitBrokers(c.KafkaBrokers)) == 0:
		return fmt.Errorf("configuration: KAFKA_BROKERS is empty")
	case c.OrdersTopic == "":
		return fmt.Errorf("configuration: ORDERS_TOPIC is empty")
	case c.DeadLetterTopic == "" || c.DeadLetterTopic == c.OrdersTopic:
		return fmt.Errorf("configuration: DEAD_LETTER_TOPIC must be set and differ from ORDERS_TOPIC")
	case c.ConsumerGroup == "":
		return fmt.Errorf("configuration: CONSUMER_GROUP is empty")
	case c.InboxRetention < 0:
		return fmt.Errorf("configuration: INBOX_RETENTION %s is negative", c.InboxRetention)
	case c.InboxMaxAttempts < 1:
		return fmt.Errorf("configuration: INBOX_MAX_ATTEMPTS must be at least 1, got %d", c.InboxMaxAttempts)
	}
	return nil
}
