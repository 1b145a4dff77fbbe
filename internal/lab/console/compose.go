package console

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/paylab/paylab/internal/lab/chaosrun"
	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/platform/envconfig"
)

// ComposeConfig is where a running docker compose deployment answers: the
// settings `paylab chaos run --target compose` reads, under the same names
// and with the same defaults, but no chaos token — the console never holds
// one.
type ComposeConfig = chaosrun.ComposeDeployment

// LoadComposeConfig reads a ComposeConfig from environ (variable → value)
// and validates it.
func LoadComposeConfig(environ map[string]string) (ComposeConfig, error) {
	cfg, err := envconfig.Load(environ, ComposeConfig{}, ComposeConfig.Validate)
	if err != nil {
		return cfg, fmt.Errorf("console: %w", err)
	}
	return cfg, nil
}

// Compose is a running docker compose deployment, reached over its admin
// APIs. Its mode is the OUTBOX_MODE its .env gave it.
type Compose struct {
	cfg ComposeConfig
	// Lookup resolves CHAOS_RELAY_DISCOVER's host name;
	// net.DefaultResolver.LookupHost unless replaced.
	Lookup chaosrun.LookupFunc

	mu       sync.Mutex
	relays   []string
	resolved time.Time
}

// NewCompose returns the deployment cfg describes.
func NewCompose(cfg ComposeConfig) *Compose {
	return &Compose{cfg: cfg, Lookup: net.DefaultResolver.LookupHost, relays: cfg.RelayAdminURLs}
}

// Target is "compose".
func (c *Compose) Target() string { return "compose" }

// Procs returns the orders API, the relays (CHAOS_RELAY_DISCOVER resolved
// again every few seconds, so a scaled deployment shows its new relays),
// the ledger and notifications.
func (c *Compose) Procs(ctx context.Context) []Proc {
	procs := []Proc{{Name: "orders", Role: RoleOrders, Admin: c.cfg.OrdersAdminURL}}
	for i, u := range c.relayURLs(ctx) {
		procs = append(procs, Proc{Name: fmt.Sprintf("relay-%d", i), Role: RoleRelay, Admin: u})
	}
	return append(procs,
		Proc{Name: "ledger", Role: RoleLedger, Admin: c.cfg.LedgerAdminURL},
		Proc{Name: "notifications", Role: RoleNotifications, Admin: c.cfg.NotificationsAdminURL})
}

func (c *Compose) relayURLs(ctx context.Context) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.RelayDiscover == "" || time.Since(c.resolved) < 5*time.Second {
		return c.relays
	}
	c.resolved = time.Now()
	urls, err := chaosrun.DiscoverAdminURLs(ctx, c.Lookup, c.cfg.RelayDiscover)
	if err == nil {
		c.relays = urls
	}
	return c.relays
}

// APIURL is CHAOS_API_URL.
func (c *Compose) APIURL() string { return c.cfg.APIURL }

// Sources are the databases and ORDERS_TOPIC.
func (c *Compose) Sources() reconcile.Sources { return c.cfg.Sources(c.cfg.Topic) }

// Settings are the deployment's OUTBOX_MODE, INBOX_ENABLED and RELAY_MODE.
func (c *Compose) Settings() Settings {
	return Settings{Mode: c.cfg.OutboxMode, Inbox: c.cfg.InboxEnabled, RelayMode: c.cfg.RelayMode}
}

// FixedMode explains that compose runs the mode of its .env.
func (c *Compose) FixedMode() string {
	return fmt.Sprintf("docker compose runs OUTBOX_MODE=%s from .env: set OUTBOX_MODE there and run docker compose up -d "+
		"(the local console, paylab console, switches by restarting the API)", c.cfg.OutboxMode)
}

// SwitchMode refuses: the containers' environment is compose's.
func (c *Compose) SwitchMode(context.Context, string) error {
	return fmt.Errorf("%w: %s", ErrFixedMode, c.FixedMode())
}
