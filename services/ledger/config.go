package main

import (
	"fmt"

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
	return nil
}
