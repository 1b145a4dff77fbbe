package consumersvc

import (
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/platform/envconfig"
)

func TestValidateNamesTheVariable(t *testing.T) {
	t.Parallel()
	good := Config{DatabaseURL: "postgres://x", KafkaBrokers: "k:1", OrdersTopic: "o", DeadLetterTopic: "o.dlq",
		ConsumerGroup: "g", InboxMaxAttempts: 1}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	for _, tc := range []struct {
		name string
		mut  func(*Config)
	}{
		{"CHAOS_TOKEN", func(c *Config) { c.ChaosEnabled, c.ChaosToken = true, "short" }},
		{"DATABASE_URL", func(c *Config) { c.DatabaseURL = "" }},
		{"KAFKA_BROKERS", func(c *Config) { c.KafkaBrokers = " , " }},
		{"ORDERS_TOPIC", func(c *Config) { c.OrdersTopic = "" }},
		{"DEAD_LETTER_TOPIC", func(c *Config) { c.DeadLetterTopic = c.OrdersTopic }},
		{"CONSUMER_GROUP", func(c *Config) { c.ConsumerGroup = "" }},
		{"INBOX_RETENTION", func(c *Config) { c.InboxRetention = -time.Second }},
		{"INBOX_MAX_ATTEMPTS", func(c *Config) { c.InboxMaxAttempts = 0 }},
	} {
		c := good
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: error %v does not name the variable", tc.name, err)
		}
	}
}

// TestLoadKeepsServiceDefaults: a variable left unset keeps the service's
// own default; a set one wins; the shared envDefaults apply.
func TestLoadKeepsServiceDefaults(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	t.Setenv("CONSUMER_GROUP", "custom")
	t.Setenv("ADMIN_PPROF", "true")
	type svc struct {
		Config
		Extra string `env:"PAYLAB_TEST_EXTRA" envDefault:"x"`
	}
	cfg, err := envconfig.Load(nil, svc{Config: Defaults("ledger", "127.0.0.1:9082")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ConsumerGroup != "custom" || !cfg.Profiling {
		t.Errorf("CONSUMER_GROUP = %q, ADMIN_PPROF %v: want the variables' values", cfg.ConsumerGroup, cfg.Profiling)
	}
	if cfg.AdminAddr != "127.0.0.1:9082" || !strings.Contains(cfg.DatabaseURL, "/ledger?") {
		t.Errorf("service defaults lost: admin %q, database %q", cfg.AdminAddr, cfg.DatabaseURL)
	}
	if cfg.OrdersTopic != "order-events" || cfg.InboxMaxAttempts != 5 || cfg.Extra != "x" {
		t.Errorf("envDefaults not applied: %+v", cfg)
	}
}
