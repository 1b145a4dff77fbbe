package main

import (
	"fmt"
	"time"

	"github.com/paylab/paylab/internal/platform/consumersvc"
	"github.com/paylab/paylab/internal/platform/envconfig"
)

// config is the ledger's configuration, from environment variables: the
// settings every consumer has, and the ledger's own.
type config struct {
	consumersvc.Config
	HTTPAddr string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8082"`
	// InboxBatchSize is how many waiting messages of a partition are applied
	// in one transaction, with a fixed number of statements (see
	// inbox.Config.BatchSize and ledger.Apply); 1 applies each on its own.
	InboxBatchSize int `env:"INBOX_BATCH_SIZE" envDefault:"500"`
	// The read API's admission, as the orders API's: how long a merchant
	// API key's row is cached (a revoked key is refused within it), each
	// key's request rate per second and burst (0: no limit), and the
	// deadline of a request.
	APIKeyCacheTTL time.Duration `env:"API_KEY_CACHE_TTL" envDefault:"10s"`
	APIRateLimit   float64       `env:"API_RATE_LIMIT" envDefault:"200"`
	APIRateBurst   int           `env:"API_RATE_BURST" envDefault:"400"`
	RequestTimeout time.Duration `env:"REQUEST_TIMEOUT" envDefault:"10s"`
	// DatabaseAcquireTimeout bounds a read's wait for a pooled connection,
	// then 503, as the orders API's does.
	DatabaseAcquireTimeout time.Duration `env:"DATABASE_ACQUIRE_TIMEOUT" envDefault:"2s"`
}

func loadConfig() (config, error) {
	return envconfig.Load(nil, config{Config: consumersvc.Defaults("ledger", "127.0.0.1:9082")}, config.validate)
}

func (c config) validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if c.InboxBatchSize < 1 {
		return fmt.Errorf("configuration: INBOX_BATCH_SIZE must be at least 1, got %d", c.InboxBatchSize)
	}
	switch {
	case c.APIKeyCacheTTL <= 0:
		return fmt.Errorf("configuration: API_KEY_CACHE_TTL must be positive, got %s", c.APIKeyCacheTTL)
	case c.APIRateLimit < 0:
		return fmt.Errorf("configuration: API_RATE_LIMIT must be 0 (no limit) or positive, got %v", c.APIRateLimit)
	case c.APIRateLimit > 0 && c.APIRateBurst < 1:
		return fmt.Errorf("configuration: API_RATE_BURST must be at least 1, got %d", c.APIRateBurst)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("configuration: REQUEST_TIMEOUT must be positive, got %s", c.RequestTimeout)
	case c.DatabaseAcquireTimeout <= 0:
		return fmt.Errorf("configuration: DATABASE_ACQUIRE_TIMEOUT must be positive, got %s", c.DatabaseAcquireTimeout)
	}
	return nil
}
