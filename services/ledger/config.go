package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/paylab/paylab/internal/broker"
)

// config is the ledger's configuration, from environment variables.
type config struct {
	DatabaseURL     string `env:"DATABASE_URL" envDefault:"postgres://ledger:ledger@127.0.0.1:55432/ledger?sslmode=disable"`
	KafkaBrokers    string `env:"KAFKA_BROKERS" envDefault:"127.0.0.1:59092"`
	OrdersTopic     string `env:"ORDERS_TOPIC" envDefault:"order-events"`
	DeadLetterTopic string `env:"DEAD_LETTER_TOPIC" envDefault:"order-events.dlq"`
	ConsumerGroup   string `env:"CONSUMER_GROUP" envDefault:"ledger"`
	HTTPAddr        string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8082"`
	AdminAddr       string `env:"ADMIN_ADDR" envDefault:"127.0.0.1:9082"`
	// InboxEnabled=false turns dedupe and ordering off: a demonstration of
	// what the inbox prevents, never for production.
	InboxEnabled bool `env:"INBOX_ENABLED" envDefault:"true"`
	// InboxRetention keeps processed inbox rows this long; it must exceed
	// Kafka's retention (the replay horizon). 0 keeps them forever.
	InboxRetention   time.Duration `env:"INBOX_RETENTION" envDefault:"168h"`
	InboxMaxAttempts int           `env:"INBOX_MAX_ATTEMPTS" envDefault:"5"`
	// InboxBatchSize is how many waiting messages of a partition are applied
	// in one transaction, with a fixed number of statements (see
	// inbox.Config.BatchSize and ledger.Apply); 1 applies each on its own.
	InboxBatchSize int        `env:"INBOX_BATCH_SIZE" envDefault:"500"`
	LogLevel       slog.Level `env:"LOG_LEVEL" envDefault:"info"`
	// ChaosEnabled mounts the fault-injection controls (/chaos/…) on the
	// admin listener, guarded by the bearer token ChaosToken.
	ChaosEnabled bool   `env:"CHAOS_ENABLED" envDefault:"false"`
	ChaosToken   string `env:"CHAOS_TOKEN"`
}

func loadConfig() (config, error) {
	cfg, err := env.ParseAs[config]()
	if err != nil {
		return cfg, fmt.Errorf("configuration: %w", err)
	}
	return cfg, cfg.validate()
}

func (c config) validate() error {
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
	case c.InboxBatchSize < 1:
		return fmt.Errorf("configuration: INBOX_BATCH_SIZE must be at least 1, got %d", c.InboxBatchSize)
	case c.InboxMaxAttempts < 1:
		return fmt.Errorf("configuration: INBOX_MAX_ATTEMPTS must be at least 1, got %d", c.InboxMaxAttempts)
	}
	return nil
}
