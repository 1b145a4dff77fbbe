package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/chaos"
)

// ComposeConfig is where a running docker compose deployment answers and how
// it is configured. The defaults are what docker-compose.yml publishes on
// localhost, for a run from the host; the chaos service of its chaos profile
// sets the addresses inside the compose network instead.
type ComposeConfig struct {
	APIURL                string `env:"CHAOS_API_URL" envDefault:"http://127.0.0.1:8080"`
	OrdersAdminURL        string `env:"CHAOS_ORDERS_ADMIN_URL" envDefault:"http://127.0.0.1:9080"`
	LedgerAdminURL        string `env:"CHAOS_LEDGER_ADMIN_URL" envDefault:"http://127.0.0.1:9082"`
	NotificationsAdminURL string `env:"CHAOS_NOTIFICATIONS_ADMIN_URL" envDefault:"http://127.0.0.1:9083"`
	// RelayAdminURLs has one admin URL per relay. Compose publishes none
	// (the replicas' host ports would collide), so from the host the relay
	// scenarios are skipped unless they are set.
	RelayAdminURLs []string `env:"CHAOS_RELAY_ADMIN_URLS" envSeparator:","`
	// Token is the deployment's CHAOS_TOKEN (compose's default unless set).
	Token string `env:"CHAOS_TOKEN" envDefault:"change-me-chaos-token"`
	// The deployment's settings, read from the same environment and .env
	// that docker compose interpolates into the services.
	OutboxMode   string `env:"OUTBOX_MODE" envDefault:"outbox"`
	InboxEnabled bool   `env:"INBOX_ENABLED" envDefault:"true"`
	// Topic is the services' ORDERS_TOPIC; compose leaves the default.
	Topic string `env:"ORDERS_TOPIC" envDefault:"order-events"`
	// LeaseTTL is the relays' RELAY_LEASE_TTL; compose leaves the default.
	LeaseTTL time.Duration `env:"CHAOS_RELAY_LEASE_TTL" envDefault:"30s"`
	// The three databases and the brokers, for the reconciliation.
	reconcile.Config
}

// LoadComposeConfig reads a ComposeConfig from environ (variable → value)
// and validates it.
func LoadComposeConfig(environ map[string]string) (ComposeConfig, error) {
	cfg, err := env.ParseAsWithOptions[ComposeConfig](env.Options{Environment: environ})
	if err != nil {
		return cfg, fmt.Errorf("compose target: %w", err)
	}
	return cfg, cfg.Validate()
}

// Validate reports every unusable setting, naming its variable.
func (c ComposeConfig) Validate() error {
	var errs []error
	for name, u := range map[string]string{
		"CHAOS_API_URL": c.APIURL, "CHAOS_ORDERS_ADMIN_URL": c.OrdersAdminURL,
		"CHAOS_LEDGER_ADMIN_URL": c.LedgerAdminURL, "CHAOS_NOTIFICATIONS_ADMIN_URL": c.NotificationsAdminURL,
	} {
		errs = append(errs, checkURL(name, u))
	}
	for _, u := range c.RelayAdminURLs {
		errs = append(errs, checkURL("CHAOS_RELAY_ADMIN_URLS", u))
	}
	if c.Token == "" {
		errs = append(errs, errors.New("CHAOS_TOKEN is empty"))
	}
	if !slices.Contains([]string{"outbox", "naive", "naive-publish-first"}, c.OutboxMode) {
		errs = append(errs, fmt.Errorf("OUTBOX_MODE %q is not one of outbox, naive, naive-publish-first", c.OutboxMode))
	}
	if c.LeaseTTL <= 0 {
		errs = append(errs, fmt.Errorf("CHAOS_RELAY_LEASE_TTL %v is not positive", c.LeaseTTL))
	}
	if len(broker.SplitBrokers(c.KafkaBrokers)) == 0 {
		errs = append(errs, errors.New("KAFKA_BROKERS is empty"))
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("ORDERS_TOPIC is empty"))
	}
	return errors.Join(errs...)
}

func checkURL(name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q is not an http URL", name, raw)
	}
	return nil
}

// Compose is the target of a running docker compose deployment. It starts
// nothing and sends no signal: faults are armed and processes killed over
// their admin listeners, the containers' restart policy brings the killed
// back, and every scenario runs on the same deployment, one at a time.
// Scenarios that need another configuration, or a server stopped, are
// skipped with the reason.
type Compose struct {
	cfg ComposeConfig
	d   *Deployment
}

// NewCompose returns the target of the deployment cfg describes.
func NewCompose(cfg ComposeConfig) *Compose {
	proc := func(name, adminURL string) *Process {
		p := newProcess(name, adminURL, cfg.Token, nil)
		p.kill = p.chaos.Kill
		return p
	}
	d := &Deployment{
		APIURL:        cfg.APIURL,
		Src:           cfg.Sources(cfg.Topic),
		Orders:        proc("orders", cfg.OrdersAdminURL),
		Ledger:        proc("ledger", cfg.LedgerAdminURL),
		Notifications: proc("notifications", cfg.NotificationsAdminURL),
		LeaseTTL:      cfg.LeaseTTL,
	}
	for i, u := range cfg.RelayAdminURLs {
		d.Relays = append(d.Relays, proc(fmt.Sprintf("relay-%d", i), u))
	}
	return &Compose{cfg: cfg, d: d}
}

// Check makes sure the deployment is up and its chaos controls take the
// token, so that a wrong setting fails once, clearly, rather than in every
// scenario.
func (c *Compose) Check(ctx context.Context) error {
	for _, p := range c.d.all() {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := p.WaitReady(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("is the deployment up (docker compose up -d)? %w", err)
		}
		_, err = p.chaos.List(ctx)
		var apiErr *chaos.APIError
		switch {
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized:
			return fmt.Errorf("%s refuses CHAOS_TOKEN: set the deployment's token (.env or the environment): %w", p.Name, err)
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound:
			return fmt.Errorf("%s has no chaos controls: the deployment runs with CHAOS_ENABLED=false: %w", p.Name, err)
		case err != nil:
			return err
		}
	}
	return nil
}

// Deploy returns the running deployment when it can give sc what sc needs.
func (c *Compose) Deploy(ctx context.Context, sc Scenario) (*Deployment, error) {
	switch {
	case sc.stops != "":
		return nil, skip("stops %s, which no admin API can do (run it with --target local)", sc.stops)
	case sc.opts.mode != c.cfg.OutboxMode:
		return nil, skip("needs OUTBOX_MODE=%s; the deployment runs OUTBOX_MODE=%s", sc.opts.mode, c.cfg.OutboxMode)
	case sc.opts.inboxEnabled != c.cfg.InboxEnabled:
		return nil, skip("needs INBOX_ENABLED=%t; the deployment runs INBOX_ENABLED=%t", sc.opts.inboxEnabled, c.cfg.InboxEnabled)
	case len(c.d.Relays) < sc.minRelays:
		return nil, skip("drives %d relays, %d relay admin URLs given (CHAOS_RELAY_ADMIN_URLS: compose publishes no relay port; "+
			"run it inside the compose network: docker compose --profile chaos run --rm chaos)", sc.minRelays, len(c.d.Relays))
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, p := range c.d.all() {
		if err := p.WaitReady(rctx); err != nil {
			return nil, err
		}
	}
	return c.d, nil
}

// Shared is true: every scenario runs on the one deployment.
func (c *Compose) Shared() bool { return true }
