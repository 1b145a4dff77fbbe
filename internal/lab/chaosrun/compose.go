package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/platform/envconfig"
)

// ComposeDeployment is where a running docker compose deployment answers
// and how it is configured: what `paylab chaos run --target compose` and
// `paylab console --target compose` both read. The defaults are what
// docker-compose.yml publishes on localhost, for a run from the host; the
// chaos and console services set the addresses inside the compose network
// instead.
type ComposeDeployment struct {
	APIURL                string `env:"CHAOS_API_URL" envDefault:"http://127.0.0.1:8080"`
	OrdersAdminURL        string `env:"CHAOS_ORDERS_ADMIN_URL" envDefault:"http://127.0.0.1:9080"`
	LedgerAdminURL        string `env:"CHAOS_LEDGER_ADMIN_URL" envDefault:"http://127.0.0.1:9082"`
	NotificationsAdminURL string `env:"CHAOS_NOTIFICATIONS_ADMIN_URL" envDefault:"http://127.0.0.1:9083"`
	// RelayAdminURLs has one admin URL per relay. Compose publishes none
	// (the replicas' host ports would collide), so from the host the relay
	// scenarios are skipped unless they are set.
	RelayAdminURLs []string `env:"CHAOS_RELAY_ADMIN_URLS" envSeparator:","`
	// RelayDiscover, host:port, finds the relays instead: one per address
	// the host name resolves to, each with its admin listener on port. Inside
	// the compose network the service name resolves to every replica
	// (relay:9081), whatever the project is called and however many
	// `docker compose up --scale relay=N` started; it is resolved again each
	// time a scenario needs the relays. Exclusive with RelayAdminURLs.
	RelayDiscover string `env:"CHAOS_RELAY_DISCOVER"`
	// The deployment's settings, read from the same environment and .env
	// that docker compose interpolates into the services.
	OutboxMode   string `env:"OUTBOX_MODE" envDefault:"outbox"`
	InboxEnabled bool   `env:"INBOX_ENABLED" envDefault:"true"`
	// RelayMode is the relays' RELAY_MODE (RelayPoll or RelayWAL).
	RelayMode string `env:"RELAY_MODE" envDefault:"poll"`
	// Topic is the services' ORDERS_TOPIC; compose leaves the default.
	Topic string `env:"ORDERS_TOPIC" envDefault:"order-events"`
	// The three databases and the brokers, for the reconciliation.
	reconcile.Config
}

// OutboxModes are the orders API's OUTBOX_MODE values.
var OutboxModes = []string{"outbox", "naive", "naive-publish-first"}

// Validate reports every unusable setting, naming its variable.
func (c ComposeDeployment) Validate() error {
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
	if c.RelayDiscover != "" {
		errs = append(errs, checkHostPort("CHAOS_RELAY_DISCOVER", c.RelayDiscover))
		if len(c.RelayAdminURLs) > 0 {
			errs = append(errs, errors.New("CHAOS_RELAY_ADMIN_URLS and CHAOS_RELAY_DISCOVER are both set: set one (the URLs of the relays, or host:port to find them by)"))
		}
	}
	if c.RelayMode != RelayPoll && c.RelayMode != RelayWAL {
		errs = append(errs, fmt.Errorf("RELAY_MODE %q is not %s or %s", c.RelayMode, RelayPoll, RelayWAL))
	}
	if !slices.Contains(OutboxModes, c.OutboxMode) {
		errs = append(errs, fmt.Errorf("OUTBOX_MODE %q is not one of %s", c.OutboxMode, strings.Join(OutboxModes, ", ")))
	}
	if len(broker.SplitBrokers(c.KafkaBrokers)) == 0 {
		errs = append(errs, errors.New("KAFKA_BROKERS is empty"))
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("ORDERS_TOPIC is empty"))
	}
	return errors.Join(errs...)
}

// ComposeConfig is what the chaos runner needs of a compose deployment:
// where it answers, and the token its chaos controls take.
type ComposeConfig struct {
	ComposeDeployment
	// Token is the deployment's CHAOS_TOKEN, the one .env gives the
	// services (compose has none of its own).
	Token string `env:"CHAOS_TOKEN"`
	// LeaseTTL is the relays' RELAY_LEASE_TTL; compose leaves the default.
	LeaseTTL time.Duration `env:"CHAOS_RELAY_LEASE_TTL" envDefault:"30s"`
}

// LoadComposeConfig reads a ComposeConfig from environ (variable → value)
// and validates it.
func LoadComposeConfig(environ map[string]string) (ComposeConfig, error) {
	cfg, err := envconfig.Load(environ, ComposeConfig{}, ComposeConfig.Validate)
	if err != nil {
		return cfg, fmt.Errorf("compose target: %w", err)
	}
	return cfg, nil
}

// Validate reports every unusable setting, naming its variable.
func (c ComposeConfig) Validate() error {
	errs := []error{c.ComposeDeployment.Validate()}
	if c.Token == "" {
		errs = append(errs, errors.New("CHAOS_TOKEN is empty: the deployment's chaos controls need CHAOS_ENABLED=true "+
			"and a CHAOS_TOKEN of your own in .env (then docker compose up -d)"))
	}
	if c.LeaseTTL <= 0 {
		errs = append(errs, fmt.Errorf("CHAOS_RELAY_LEASE_TTL %v is not positive", c.LeaseTTL))
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

// checkHostPort reports a value that is not host:port with a port number.
func checkHostPort(name, raw string) error {
	host, port, err := net.SplitHostPort(raw)
	if err != nil || host == "" {
		return fmt.Errorf("%s %q is not host:port (e.g. relay:9081)", name, raw)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%s %q: port %q is not a port number", name, raw, port)
	}
	return nil
}

// LookupFunc resolves a host name to its addresses, as
// net.DefaultResolver.LookupHost does.
type LookupFunc func(ctx context.Context, host string) ([]string, error)

// DiscoverAdminURLs resolves hostPort (host:port) with lookup and returns
// http://address:port for each address host resolves to, in address order.
// Where the name resolves to IPv4 and IPv6 addresses alike (localhost, a
// dual-stack network) each process answers on both, so only the IPv4 ones
// are kept: one URL per process.
func DiscoverAdminURLs(ctx context.Context, lookup LookupFunc, hostPort string) ([]string, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, err
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var v4, v6 []netip.Addr
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("%s resolved to %q, not an IP address", host, a)
		}
		if ip = ip.Unmap(); ip.Is4() {
			v4 = append(v4, ip)
		} else {
			v6 = append(v6, ip)
		}
	}
	ips := v4
	if len(ips) == 0 {
		ips = v6
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("%s resolved to no address", host)
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	urls := make([]string, len(ips))
	for i, ip := range ips {
		urls[i] = "http://" + net.JoinHostPort(ip.String(), port)
	}
	return urls, nil
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
	// Lookup resolves CHAOS_RELAY_DISCOVER's host name;
	// net.DefaultResolver.LookupHost unless replaced (tests).
	Lookup LookupFunc
}

// NewCompose returns the target of the deployment cfg describes.
func NewCompose(cfg ComposeConfig) *Compose {
	c := &Compose{cfg: cfg, Lookup: net.DefaultResolver.LookupHost}
	c.d = &Deployment{
		APIURL:        cfg.APIURL,
		Src:           cfg.Sources(cfg.Topic),
		Orders:        c.process("orders", cfg.OrdersAdminURL),
		Ledger:        c.process("ledger", cfg.LedgerAdminURL),
		Notifications: c.process("notifications", cfg.NotificationsAdminURL),
		LeaseTTL:      cfg.LeaseTTL,
		RelayMode:     cfg.RelayMode,
	}
	c.d.Ledgers = []*Process{c.d.Ledger}
	c.setRelays(cfg.RelayAdminURLs)
	return c
}

// process is a process of the deployment, killed over its admin listener.
func (c *Compose) process(name, adminURL string) *Process {
	p := newProcess(name, adminURL, c.cfg.Token, nil)
	p.kill = p.chaos.Kill
	return p
}

func (c *Compose) setRelays(urls []string) {
	c.d.Relays = nil
	for i, u := range urls {
		c.d.Relays = append(c.d.Relays, c.process(fmt.Sprintf("relay-%d", i), u))
	}
}

// RelayAdminURLs returns the relays' admin URLs: CHAOS_RELAY_ADMIN_URLS, or
// what CHAOS_RELAY_DISCOVER resolved to the last time.
func (c *Compose) RelayAdminURLs() []string {
	urls := make([]string, len(c.d.Relays))
	for i, p := range c.d.Relays {
		urls[i] = p.Admin
	}
	return urls
}

// discoverRelays resolves CHAOS_RELAY_DISCOVER again, when it is set, and
// makes the deployment's relays the addresses it resolves to now: a relay
// added by scaling up is driven from the next scenario on.
func (c *Compose) discoverRelays(ctx context.Context) error {
	if c.cfg.RelayDiscover == "" {
		return nil
	}
	urls, err := DiscoverAdminURLs(ctx, c.Lookup, c.cfg.RelayDiscover)
	if err != nil {
		return fmt.Errorf("finding the relays (CHAOS_RELAY_DISCOVER=%s): %w", c.cfg.RelayDiscover, err)
	}
	c.setRelays(urls)
	return nil
}

// Check makes sure the deployment is up and its chaos controls take the
// token, so that a wrong setting fails once, clearly, rather than in every
// scenario.
func (c *Compose) Check(ctx context.Context) error {
	if err := c.discoverRelays(ctx); err != nil {
		return fmt.Errorf("is the deployment up (docker compose up -d)? %w", err)
	}
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
	case sc.opts.wal:
		return nil, skip("drives the WAL relay's slot and publication as PostgreSQL's superuser and starts relays of its own, which no admin API can do (run it with --target local --relay-mode wal)")
	case sc.pauses:
		return nil, skip("stalls a process with SIGSTOP, which no admin API can do (run it with --target local)")
	case sc.opts.ledgers > 1:
		return nil, skip("drives %d ledger instances in one group (run it with --target local)", sc.opts.ledgers)
	case sc.opts.mode != c.cfg.OutboxMode:
		return nil, skip("needs OUTBOX_MODE=%s; the deployment runs OUTBOX_MODE=%s", sc.opts.mode, c.cfg.OutboxMode)
	case sc.opts.inboxEnabled != c.cfg.InboxEnabled:
		return nil, skip("needs INBOX_ENABLED=%t; the deployment runs INBOX_ENABLED=%t", sc.opts.inboxEnabled, c.cfg.InboxEnabled)
	}
	if err := c.discoverRelays(ctx); err != nil {
		return nil, err
	}
	switch {
	case len(c.d.Relays) < sc.minRelays && c.cfg.RelayDiscover != "":
		return nil, skip("drives %d relays, %d found at CHAOS_RELAY_DISCOVER=%s (docker compose up -d --scale relay=%d)",
			sc.minRelays, len(c.d.Relays), c.cfg.RelayDiscover, sc.minRelays)
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
