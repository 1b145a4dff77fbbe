package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/services/orders/internal/config"
)

func TestDefaults(t *testing.T) {
	for _, v := range []string{"DATABASE_URL", "KAFKA_BROKERS", "ORDERS_TOPIC", "HTTP_ADDR", "ADMIN_ADDR", "OUTBOX_MODE",
		"LOG_LEVEL", "IDEMPOTENCY_RETENTION", "IDEMPOTENCY_PRUNE_INTERVAL", "SHUTDOWN_TIMEOUT", "DATABASE_MAX_CONNS",
		"DATABASE_ACQUIRE_TIMEOUT", "REQUEST_TIMEOUT", "API_KEY_CACHE_TTL", "API_RATE_LIMIT", "API_RATE_BURST"} {
		t.Setenv(v, "")
	}
	cfg, err := config.LoadAPI()
	if err != nil {
		t.Fatal(err)
	}
	want := config.API{
		DatabaseURL:  "postgres://orders_api:orders_api@127.0.0.1:55432/orders?sslmode=disable",
		KafkaBrokers: "127.0.0.1:59092", OrdersTopic: "order-events",
		HTTPAddr: "127.0.0.1:8080", AdminAddr: "127.0.0.1:9080", OutboxMode: "outbox", LogLevel: "info",
		IdempotencyRetention: 24 * time.Hour, IdempotencyPruneInterval: 10 * time.Minute,
		ShutdownTimeout: 15 * time.Second, DatabaseMaxConns: 10,
		DatabaseAcquireTimeout: 2 * time.Second, RequestTimeout: 10 * time.Second,
		APIKeyCacheTTL: 10 * time.Second, APIRateLimit: 200, APIRateBurst: 400,
	}
	if cfg != want {
		t.Fatalf("defaults = %+v\nwant %+v", cfg, want)
	}
}

func TestInvalidSettingsNameTheirVariable(t *testing.T) {
	t.Setenv("SHUTDOWN_TIMEOUT", "soon")
	if _, err := config.LoadAPI(); err == nil || !strings.Contains(err.Error(), "SHUTDOWN_TIMEOUT") {
		t.Errorf("unparseable duration: %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	valid := config.API{
		DatabaseURL:  "postgres://orders:secret@127.0.0.1:55432/orders?sslmode=disable",
		KafkaBrokers: "127.0.0.1:59092", OrdersTopic: "order-events",
		HTTPAddr: "127.0.0.1:8080", AdminAddr: "127.0.0.1:9080", OutboxMode: "outbox", LogLevel: "info",
		IdempotencyRetention: 24 * time.Hour, IdempotencyPruneInterval: time.Minute,
		ShutdownTimeout: time.Second, DatabaseMaxConns: 1,
		DatabaseAcquireTimeout: time.Second, RequestTimeout: time.Second, APIKeyCacheTTL: time.Second,
	}
	if err := valid.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		variable string
		mutate   func(*config.API)
	}{
		{"DATABASE_URL", func(c *config.API) { c.DatabaseURL = "postgres://orders:secret@127.0.0.1:notaport/orders" }},
		{"KAFKA_BROKERS", func(c *config.API) { c.KafkaBrokers = " , " }},
		{"KAFKA_BROKERS", func(c *config.API) { c.KafkaBrokers = "localhost" }},
		{"ORDERS_TOPIC", func(c *config.API) { c.OrdersTopic = "order events" }},
		{"HTTP_ADDR", func(c *config.API) { c.HTTPAddr = "8080" }},
		{"ADMIN_ADDR", func(c *config.API) { c.AdminAddr = "" }},
		{"ADMIN_ADDR", func(c *config.API) { c.AdminAddr = c.HTTPAddr }},
		{"OUTBOX_MODE", func(c *config.API) { c.OutboxMode = "inbox" }},
		{"LOG_LEVEL", func(c *config.API) { c.LogLevel = "loud" }},
		{"IDEMPOTENCY_RETENTION", func(c *config.API) { c.IdempotencyRetention = time.Hour }},
		{"IDEMPOTENCY_PRUNE_INTERVAL", func(c *config.API) { c.IdempotencyPruneInterval = 0 }},
		{"SHUTDOWN_TIMEOUT", func(c *config.API) { c.ShutdownTimeout = -time.Second }},
		{"DATABASE_MAX_CONNS", func(c *config.API) { c.DatabaseMaxConns = 0 }},
		{"DATABASE_ACQUIRE_TIMEOUT", func(c *config.API) { c.DatabaseAcquireTimeout = 0 }},
		{"REQUEST_TIMEOUT", func(c *config.API) { c.RequestTimeout = -time.Second }},
		{"API_KEY_CACHE_TTL", func(c *config.API) { c.APIKeyCacheTTL = 0 }},
		{"API_RATE_LIMIT", func(c *config.API) { c.APIRateLimit = -1 }},
		{"API_RATE_BURST", func(c *config.API) { c.APIRateLimit, c.APIRateBurst = 10, 0 }},
	}
	for _, tt := range tests {
		c := valid
		tt.mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.variable) {
			t.Errorf("%s: err = %v, want a message naming it", tt.variable, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the message reveals the password: %v", tt.variable, err)
		}
	}
	// Several problems are reported together.
	c := valid
	c.OutboxMode, c.LogLevel = "x", "y"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "OUTBOX_MODE") || !strings.Contains(err.Error(), "LOG_LEVEL") {
		t.Errorf("two problems: %v", err)
	}
}

func TestLogValueMasksThePassword(t *testing.T) {
	t.Parallel()
	c := config.API{DatabaseURL: "postgres://orders:secret@db/orders"}
	if s := c.LogValue().String(); strings.Contains(s, "secret") || !strings.Contains(s, "orders:xxxxx@db") {
		t.Fatalf("LogValue = %s", s)
	}
}
