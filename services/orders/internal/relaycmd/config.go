package relaycmd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"time"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/envconfig"
	"github.com/paylab/paylab/internal/platform/telemetry"
	"github.com/paylab/paylab/pkg/outbox"
)

// Config is the relay process's configuration, read from the environment.
// The relay's own settings (RELAY_BATCH_SIZE …) map one to one onto the
// library's configuration (outbox.RelayConfig, outbox.WALConfig): unset or
// zero takes the library's default, and the library validates them.
type Config struct {
	DatabaseURL  string `env:"DATABASE_URL" envDefault:"postgres://orders_relay:orders_relay@127.0.0.1:55432/orders?sslmode=disable" redact:"password"`
	KafkaBrokers string `env:"KAFKA_BROKERS" envDefault:"127.0.0.1:59092"`
	AdminAddr    string `env:"ADMIN_ADDR" envDefault:"127.0.0.1:9081"`
	// Mode is poll (claim rows with leases; any number of relays share the
	// work) or wal (stream the outbox's inserts from a logical replication
	// slot; one reader, the other relays stand by).
	Mode string `env:"RELAY_MODE" envDefault:"poll"`
	// ReplicationURL connects the WAL relay's replication stream; default
	// DATABASE_URL. The role needs the REPLICATION attribute.
	ReplicationURL string `env:"RELAY_REPLICATION_URL" redact:"password"`
	// Slot and Publication name the WAL relay's slot and publication
	// (outbox.WALConfig.Slot, .Publication).
	Slot        string `env:"RELAY_SLOT"`
	Publication string `env:"RELAY_PUBLICATION"`
	// StandbyGuard is outbox.WALConfig.StandbyGuard: auto, on or off.
	StandbyGuard string `env:"RELAY_STANDBY_GUARD"`
	// RelayID names this relay in lease_owner (outbox.RelayConfig.ID). A
	// relay started with the ID of a running relay is refused.
	RelayID           string        `env:"RELAY_ID"`
	BatchSize         int           `env:"RELAY_BATCH_SIZE"`
	LeaseTTL          time.Duration `env:"RELAY_LEASE_TTL"`
	PollInterval      time.Duration `env:"RELAY_POLL_INTERVAL"`
	RoundInterval     time.Duration `env:"RELAY_ROUND_INTERVAL"`
	RetryBackoff      time.Duration `env:"RELAY_RETRY_BACKOFF"`
	RetryMaxBackoff   time.Duration `env:"RELAY_RETRY_MAX_BACKOFF"`
	OutageMaxBackoff  time.Duration `env:"RELAY_OUTAGE_MAX_BACKOFF"`
	MaxAttempts       int           `env:"RELAY_MAX_ATTEMPTS"`
	Retention         time.Duration `env:"OUTBOX_RETENTION"`
	DeleteDispatched  bool          `env:"RELAY_DELETE_DISPATCHED"`
	RetentionInterval time.Duration `env:"RELAY_RETENTION_INTERVAL"`
	StatsInterval     time.Duration `env:"RELAY_STATS_INTERVAL"`
	ShutdownTimeout   time.Duration `env:"RELAY_SHUTDOWN_TIMEOUT" envDefault:"20s"`
	// LeaseFencing false lets a relay record rows whose lease it lost
	// (outbox.Unsafe.UnfencedComplete): only to show what the check
	// prevents.
	LeaseFencing bool   `env:"RELAY_LEASE_FENCING" envDefault:"true"`
	ChaosEnabled bool   `env:"CHAOS_ENABLED" envDefault:"false"`
	ChaosToken   string `env:"CHAOS_TOKEN" redact:"value"`
	// Profiling serves Go's profiles on the admin listener (/debug/pprof/).
	Profiling bool `env:"ADMIN_PPROF" envDefault:"false"`
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
		errs = append(errs, c.validateRelay())
	default:
		bad("RELAY_MODE %q is not %s or %s", c.Mode, ModePoll, ModeWAL)
	}
	if c.ShutdownTimeout <= 0 {
		bad("RELAY_SHUTDOWN_TIMEOUT %v is not positive", c.ShutdownTimeout)
	}
	if c.ChaosEnabled && len(c.ChaosToken) < 16 {
		bad("CHAOS_TOKEN must be at least 16 characters when CHAOS_ENABLED=true")
	}
	return errors.Join(errs...)
}

// validateRelay is the library's validation of the relay's settings. To
// name the variable at fault, each variable set is validated alone too
// (the others at their defaults); what only a combination breaks is
// reported as a whole.
func (c Config) validateRelay() error {
	err := c.relayValidate()
	if err == nil {
		return nil
	}
	var (
		errs []error
		set  []string
	)
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("env"), ",")
		if !libraryVar(name) || v.Field(i).IsZero() {
			continue
		}
		one := Config{Mode: c.Mode}
		reflect.ValueOf(&one).Elem().Field(i).Set(v.Field(i))
		if ferr := one.relayValidate(); ferr != nil {
			errs = append(errs, fmt.Errorf("%s=%v: %w", name, v.Field(i), ferr))
		} else {
			set = append(set, fmt.Sprintf("%s=%v", name, v.Field(i)))
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("%s: %w", strings.Join(set, ", "), err)
	}
	return errors.Join(errs...)
}

// libraryVar reports whether the variable name maps onto a field of the
// library's configuration.
func libraryVar(name string) bool {
	switch name {
	case "RELAY_MODE", "RELAY_REPLICATION_URL", "RELAY_SHUTDOWN_TIMEOUT", "RELAY_LEASE_FENCING":
		return false
	}
	return strings.HasPrefix(name, "RELAY_") || strings.HasPrefix(name, "OUTBOX_")
}

// relayValidate validates the library configuration of c's mode.
func (c Config) relayValidate() error {
	if c.Mode == ModeWAL {
		return c.WALConfig(nil).Validate()
	}
	return c.RelayConfig(nil).Validate()
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

// leaseTTL is the relay's lease TTL, after the library's default.
func (c Config) leaseTTL() time.Duration {
	if c.LeaseTTL == 0 {
		return outbox.DefaultLeaseTTL
	}
	return c.LeaseTTL
}

// RelayConfig is the polling relay's library configuration, logging to log.
func (c Config) RelayConfig(log *slog.Logger) outbox.RelayConfig {
	return outbox.RelayConfig{
		MetricPrefix:      telemetry.OutboxMetricPrefix,
		ID:                c.RelayID,
		BatchSize:         c.BatchSize,
		LeaseTTL:          c.LeaseTTL,
		PollInterval:      c.PollInterval,
		RoundInterval:     c.RoundInterval,
		RetryBackoff:      c.RetryBackoff,
		RetryMaxBackoff:   c.RetryMaxBackoff,
		OutageMaxBackoff:  c.OutageMaxBackoff,
		MaxAttempts:       c.MaxAttempts,
		Retention:         c.Retention,
		DeleteDispatched:  c.DeleteDispatched,
		RetentionInterval: c.RetentionInterval,
		StatsInterval:     c.StatsInterval,
		Logger:            log,
		Hooks:             faultHooks,
		Unsafe:            outbox.Unsafe{UnfencedComplete: !c.LeaseFencing},
	}
}

// WALConfig is the WAL relay's library configuration, logging to log.
func (c Config) WALConfig(log *slog.Logger) outbox.WALConfig {
	return outbox.WALConfig{
		MetricPrefix:      telemetry.OutboxMetricPrefix,
		ID:                c.RelayID,
		Slot:              c.Slot,
		Publication:       c.Publication,
		StandbyGuard:      outbox.StandbyGuard(c.StandbyGuard),
		BatchSize:         c.BatchSize,
		LeaseTTL:          c.LeaseTTL,
		PollInterval:      c.PollInterval,
		RetryBackoff:      c.RetryBackoff,
		RetryMaxBackoff:   c.RetryMaxBackoff,
		OutageMaxBackoff:  c.OutageMaxBackoff,
		MaxAttempts:       c.MaxAttempts,
		Retention:         c.Retention,
		RetentionInterval: c.RetentionInterval,
		StatsInterval:     c.StatsInterval,
		Logger:            log,
		Hooks:             faultHooks,
	}
}

// LogValue logs the configuration with the database password and the
// chaos token masked.
func (c Config) LogValue() slog.Value { return envconfig.LogValue(c) }
