package relaycmd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/envconfig"
	"github.com/paylab/paylab/pkg/outbox"
)

// Config is the relay process's configuration, read from the environment.
type Config struct {
	DatabaseURL  string `env:"DATABASE_URL" envDefault:"postgres://orders:orders@127.0.0.1:55432/orders?sslmode=disable" redact:"password"`
	KafkaBrokers string `env:"KAFKA_BROKERS" envDefault:"127.0.0.1:59092"`
	AdminAddr    string `env:"ADMIN_ADDR" envDefault:"127.0.0.1:9081"`
	// Mode is poll (claim rows with leases; any number of relays share the
	// work) or wal (stream the outbox's inserts from a logical replication
	// slot; one reader, the other relays stand by).
	Mode string `env:"RELAY_MODE" envDefault:"poll"`
	// ReplicationURL connects the WAL relay's replication stream; default
	// DATABASE_URL. The role needs the REPLICATION attribute.
	ReplicationURL string `env:"RELAY_REPLICATION_URL" redact:"password"`
	// Slot and Publication name the WAL relay's slot and publication;
	// default outbox_wal_relay and outbox_wal. A polling relay drops them
	// at start (no WAL relay runs then), so both modes need the same ones.
	Slot        string `env:"RELAY_SLOT"`
	Publication string `env:"RELAY_PUBLICATION"`
	// RelayID names this relay in lease_owner; default hostname-pid. A
	// relay started with the ID of a running relay is refused.
	RelayID           string        `env:"RELAY_ID"`
	BatchSize         int           `env:"RELAY_BATCH_SIZE" envDefault:"500"`
	LeaseTTL          time.Duration `env:"RELAY_LEASE_TTL" envDefault:"30s"`
	PollInterval      time.Duration `env:"RELAY_POLL_INTERVAL" envDefault:"1s"`
	RetryBackoff      time.Duration `env:"RELAY_RETRY_BACKOFF" envDefault:"1s"`
	RetryMaxBackoff   time.Duration `env:"RELAY_RETRY_MAX_BACKOFF" envDefault:"1m"`
	OutageMaxBackoff  time.Duration `env:"RELAY_OUTAGE_MAX_BACKOFF" envDefault:"5s"`
	MaxAttempts       int           `env:"RELAY_MAX_ATTEMPTS" envDefault:"100"`
	Retention         time.Duration `env:"OUTBOX_RETENTION" envDefault:"168h"`
	RetentionInterval time.Duration `env:"RELAY_RETENTION_INTERVAL" envDefault:"1m"`
	StatsInterval     time.Duration `env:"RELAY_STATS_INTERVAL" envDefault:"5s"`
	ShutdownTimeout   time.Duration `env:"RELAY_SHUTDOWN_TIMEOUT" envDefault:"20s"`
	// LeaseFencing false lets a relay record rows whose lease it lost
	// (outbox.Config.UnfencedComplete): only to show what the check
	// prevents.
	LeaseFencing bool   `env:"RELAY_LEASE_FENCING" envDefault:"true"`
	ChaosEnabled bool   `env:"CHAOS_ENABLED" envDefault:"false"`
	ChaosToken   string `env:"CHAOS_TOKEN" redact:"value"`
}

// LoadConfig reads the configuration from environ (as os.Environ gives it,
// parsed to a map; nil: the process's environment) and validates it.
func LoadConfig(environ map[string]string) (Config, error) {
	return envconfig.Load(environ, Config{}, Config.Validate)
}

// Validate reports every unusable setting, naming its variable.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.DatabaseURL == "" {
		bad("DATABASE_URL is empty")
	}
	if len(broker.SplitBrokers(c.KafkaBrokers)) == 0 {
		bad("KAFKA_BROKERS is empty")
	}
	if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
		bad("ADMIN_ADDR %q is not host:port: %w", c.AdminAddr, err)
	}
	switch c.Mode {
	case ModePoll, ModeWAL:
	default:
		bad("RELAY_MODE %q is not %s or %s", c.Mode, ModePoll, ModeWAL)
	}
	if err := (outbox.Config{Slot: c.Slot, Publication: c.Publication}).Validate(); err != nil {
		bad("RELAY_SLOT / RELAY_PUBLICATION: %w", err)
	}
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		bad("RELAY_BATCH_SIZE %d is not in [1, 10000]", c.BatchSize)
	}
	if c.LeaseTTL < time.Second {
		bad("RELAY_LEASE_TTL %v is shorter than 1s", c.LeaseTTL)
	}
	if c.PollInterval <= 0 || c.PollInterval > c.LeaseTTL {
		bad("RELAY_POLL_INTERVAL %v is not in (0, RELAY_LEASE_TTL %v]", c.PollInterval, c.LeaseTTL)
	}
	if c.RetryBackoff <= 0 {
		bad("RELAY_RETRY_BACKOFF %v is not positive", c.RetryBackoff)
	}
	if c.RetryMaxBackoff < c.RetryBackoff {
		bad("RELAY_RETRY_MAX_BACKOFF %v is shorter than RELAY_RETRY_BACKOFF %v", c.RetryMaxBackoff, c.RetryBackoff)
	}
	if c.OutageMaxBackoff <= 0 {
		bad("RELAY_OUTAGE_MAX_BACKOFF %v is not positive", c.OutageMaxBackoff)
	}
	if c.MaxAttempts < 0 {
		bad("RELAY_MAX_ATTEMPTS %d is negative (0 means never park for transient errors)", c.MaxAttempts)
	}
	if c.Retention < 0 {
		bad("OUTBOX_RETENTION %v is negative (0 disables deletion)", c.Retention)
	}
	if c.RetentionInterval <= 0 {
		bad("RELAY_RETENTION_INTERVAL %v is not positive", c.RetentionInterval)
	}
	if c.StatsInterval <= 0 {
		bad("RELAY_STATS_INTERVAL %v is not positive", c.StatsInterval)
	}
	if c.ShutdownTimeout <= 0 {
		bad("RELAY_SHUTDOWN_TIMEOUT %v is not positive", c.ShutdownTimeout)
	}
	if c.ChaosEnabled && len(c.ChaosToken) < 16 {
		bad("CHAOS_TOKEN must be at least 16 characters when CHAOS_ENABLED=true")
	}
	return errors.Join(errs...)
}

// Relay modes (RELAY_MODE).
const (
	ModePoll = "poll"
	ModeWAL  = "wal"
)

// replicationURL is the connection string of the WAL relay's stream.
func (c Config) replicationURL() string {
	if c.ReplicationURL != "" {
		return c.ReplicationURL
	}
	return c.DatabaseURL
}

// relayConfig maps the process configuration to the relay's.
func (c Config) relayConfig(log *slog.Logger) outbox.Config {
	maxAttempts := c.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = -1 // never
	}
	retention := c.Retention
	if retention == 0 {
		retention = -1 // disabled
	}
	return outbox.Config{
		ID:                c.RelayID,
		BatchSize:         c.BatchSize,
		LeaseTTL:          c.LeaseTTL,
		PollInterval:      c.PollInterval,
		UnfencedComplete:  !c.LeaseFencing,
		RetryBackoff:      c.RetryBackoff,
		RetryMaxBackoff:   c.RetryMaxBackoff,
		OutageMaxBackoff:  c.OutageMaxBackoff,
		MaxAttempts:       maxAttempts,
		Retention:         retention,
		RetentionInterval: c.RetentionInterval,
		StatsInterval:     c.StatsInterval,
		Logger:            log,
		Hooks:             faultHooks,
		Slot:              c.Slot,
		Publication:       c.Publication,
	}
}

// LogValue logs the configuration with the database password and the
// chaos token masked.
func (c Config) LogValue() slog.Value { return envconfig.LogValue(c) }
