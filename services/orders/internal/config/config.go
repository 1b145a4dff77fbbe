// Package config is the orders API's configuration: environment variables
// with documented defaults (services/orders/README.md), validated at start
// with messages that name the variable.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/envconfig"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

// API is the configuration of `orders serve`.
type API struct {
	DatabaseURL  string `env:"DATABASE_URL" envDefault:"postgres://orders_api:orders_api@127.0.0.1:55432/orders?sslmode=disable" redact:"password"`
	KafkaBrokers string `env:"KAFKA_BROKERS" envDefault:"127.0.0.1:59092"`
	OrdersTopic  string `env:"ORDERS_TOPIC" envDefault:"order-events"`
	HTTPAddr     string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	AdminAddr    string `env:"ADMIN_ADDR" envDefault:"127.0.0.1:9080"`
	OutboxMode   string `env:"OUTBOX_MODE" envDefault:"outbox"`
	LogLevel     string `env:"LOG_LEVEL" envDefault:"info"`
	// IdempotencyRetention is how long idempotency keys are kept (at least
	// 24 h, the API's promise); IdempotencyPruneInterval how often the
	// pruner runs.
	IdempotencyRetention     time.Duration `env:"IDEMPOTENCY_RETENTION" envDefault:"24h"`
	IdempotencyPruneInterval time.Duration `env:"IDEMPOTENCY_PRUNE_INTERVAL" envDefault:"10m"`
	// ShutdownTimeout bounds the graceful shutdown.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s"`
	// DatabaseMaxConns is the size of the connection pool.
	DatabaseMaxConns int32 `env:"DATABASE_MAX_CONNS" envDefault:"10"`
	// DatabaseAcquireTimeout bounds a request's wait for a pooled
	// connection (then 503 database_unavailable); RequestTimeout bounds a
	// whole request (then 503).
	DatabaseAcquireTimeout time.Duration `env:"DATABASE_ACQUIRE_TIMEOUT" envDefault:"2s"`
	RequestTimeout         time.Duration `env:"REQUEST_TIMEOUT" envDefault:"10s"`
	// APIKeyCacheTTL is how long a merchant API key's row is cached: a
	// revoked key is refused at most this long after paylab keys revoke.
	APIKeyCacheTTL time.Duration `env:"API_KEY_CACHE_TTL" envDefault:"10s"`
	// APIRateLimit is each API key's sustained request rate per second
	// (0: no limit) and APIRateBurst the requests it may send at once;
	// beyond them, 429 with Retry-After.
	APIRateLimit float64 `env:"API_RATE_LIMIT" envDefault:"200"`
	APIRateBurst int     `env:"API_RATE_BURST" envDefault:"400"`
	// ChaosEnabled mounts the fault-injection controls (/chaos/…) on the
	// admin listener, guarded by the bearer token ChaosToken.
	ChaosEnabled bool   `env:"CHAOS_ENABLED" envDefault:"false"`
	ChaosToken   string `env:"CHAOS_TOKEN" redact:"value"`
	// Profiling serves Go's profiles on the admin listener (/debug/pprof/).
	Profiling bool `env:"ADMIN_PPROF" envDefault:"false"`
}

// MinIdempotencyRetention is the shortest IDEMPOTENCY_RETENTION allowed.
const MinIdempotencyRetention = 24 * time.Hour

// LoadAPI reads the API's configuration from the environment and validates it.
func LoadAPI() (API, error) { return envconfig.Load(nil, API{}, API.Validate) }

var topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Validate checks every setting and reports all problems, each naming its
// variable.
func (c API) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("configuration: "+format, args...)) }

	if _, err := pgxpool.ParseConfig(c.DatabaseURL); err != nil {
		bad("DATABASE_URL is not a valid PostgreSQL URL: %v", envconfig.RedactIn(err.Error(), c.DatabaseURL))
	}
	brokers := broker.SplitBrokers(c.KafkaBrokers)
	if len(brokers) == 0 {
		bad("KAFKA_BROKERS must list at least one host:port")
	}
	for _, b := range brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			bad("KAFKA_BROKERS: %q is not host:port", b)
		}
	}
	if !topicRE.MatchString(c.OrdersTopic) || c.OrdersTopic == "." || c.OrdersTopic == ".." {
		bad("ORDERS_TOPIC %q is not a valid Kafka topic name", c.OrdersTopic)
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		bad("HTTP_ADDR %q is not host:port", c.HTTPAddr)
	}
	if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
		bad("ADMIN_ADDR %q is not host:port", c.AdminAddr)
	}
	if c.HTTPAddr == c.AdminAddr && c.HTTPAddr != "" && !endsWithPortZero(c.HTTPAddr) {
		bad("HTTP_ADDR and ADMIN_ADDR must differ, both are %q", c.HTTPAddr)
	}
	if _, err := orderapp.ParseMode(c.OutboxMode); err != nil {
		bad("OUTBOX_MODE: %v", err)
	}
	if _, err := c.Level(); err != nil {
		bad("LOG_LEVEL %q is not one of debug, info, warn, error", c.LogLevel)
	}
	if c.IdempotencyRetention < MinIdempotencyRetention {
		bad("IDEMPOTENCY_RETENTION must be at least %s, got %s", MinIdempotencyRetention, c.IdempotencyRetention)
	}
	if c.IdempotencyPruneInterval <= 0 {
		bad("IDEMPOTENCY_PRUNE_INTERVAL must be positive, got %s", c.IdempotencyPruneInterval)
	}
	if c.ShutdownTimeout <= 0 {
		bad("SHUTDOWN_TIMEOUT must be positive, got %s", c.ShutdownTimeout)
	}
	if c.DatabaseMaxConns < 1 {
		bad("DATABASE_MAX_CONNS must be at least 1, got %d", c.DatabaseMaxConns)
	}
	if c.DatabaseAcquireTimeout <= 0 {
		bad("DATABASE_ACQUIRE_TIMEOUT must be positive, got %s", c.DatabaseAcquireTimeout)
	}
	if c.RequestTimeout <= 0 {
		bad("REQUEST_TIMEOUT must be positive, got %s", c.RequestTimeout)
	}
	if c.APIKeyCacheTTL <= 0 {
		bad("API_KEY_CACHE_TTL must be positive, got %s", c.APIKeyCacheTTL)
	}
	if c.APIRateLimit < 0 {
		bad("API_RATE_LIMIT must be 0 (no limit) or positive, got %v", c.APIRateLimit)
	}
	if c.APIRateLimit > 0 && c.APIRateBurst < 1 {
		bad("API_RATE_BURST must be at least 1, got %d", c.APIRateBurst)
	}
	if c.ChaosEnabled && len(c.ChaosToken) < 16 {
		bad("CHAOS_TOKEN must be at least 16 characters when CHAOS_ENABLED=true")
	}
	return errors.Join(errs...)
}

// Mode is the parsed OUTBOX_MODE.
func (c API) Mode() orderapp.Mode {
	m, _ := orderapp.ParseMode(c.OutboxMode)
	return m
}

// Level is the parsed LOG_LEVEL.
func (c API) Level() (slog.Level, error) { return ParseLevel(c.LogLevel) }

// ParseLevel parses a LOG_LEVEL value.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

// LogValue logs the configuration with the database password and the
// chaos token masked.
func (c API) LogValue() slog.Value { return envconfig.LogValue(c) }

func endsWithPortZero(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}
