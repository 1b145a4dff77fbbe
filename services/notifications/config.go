package main

import (
	"fmt"
	"net"
	"net/mail"
	"time"

	"github.com/paylab/paylab/internal/platform/consumersvc"
	"github.com/paylab/paylab/internal/platform/envconfig"
)

// config is the notifications service's configuration, from environment
// variables: the settings every consumer has, and the SMTP ones.
type config struct {
	consumersvc.Config
	SMTPAddr string `env:"SMTP_ADDR" envDefault:"127.0.0.1:1025"`
	// SMTPTimeout bounds one whole SMTP conversation.
	SMTPTimeout time.Duration `env:"SMTP_TIMEOUT" envDefault:"10s"`
	MailFrom    string        `env:"MAIL_FROM" envDefault:"receipts@paylab.local"`
}

func loadConfig() (config, error) {
	return envconfig.Load(nil, config{Config: consumersvc.Defaults("notifications", "127.0.0.1:9083")}, config.validate)
}

func (c config) validate() error {
	if _, _, err := net.SplitHostPort(c.SMTPAddr); err != nil {
		return fmt.Errorf("configuration: SMTP_ADDR %q is not host:port", c.SMTPAddr)
	}
	if _, err := mail.ParseAddress(c.MailFrom); err != nil {
		return fmt.Errorf("configuration: MAIL_FROM %q is not an address: %w", c.MailFrom, err)
	}
	if c.SMTPTimeout <= 0 {
		return fmt.Errorf("configuration: SMTP_TIMEOUT must be positive")
	}
	return c.Config.Validate()
}
