package main

import (
	"context"
	"fmt"
	"io"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/envconfig"
	"github.com/paylab/paylab/internal/platform/migrate"
)

// setupConfig is the configuration of migrate, topics and init.
type setupConfig struct {
	AdminDatabaseURL      string `env:"PAYLAB_ADMIN_DATABASE_URL" envDefault:"postgres://postgres:postgres@127.0.0.1:55432/postgres?sslmode=disable"`
	OrdersDBPassword      string `env:"ORDERS_DB_PASSWORD" envDefault:"orders"`
	LedgerDBPassword      string `env:"LEDGER_DB_PASSWORD" envDefault:"ledger"`
	NotificationsPassword string `env:"NOTIFICATIONS_DB_PASSWORD" envDefault:"notifications"`
	KafkaBrokers          string `env:"KAFKA_BROKERS" envDefault:"127.0.0.1:59092"`
	TopicPartitions       int32  `env:"ORDER_EVENTS_PARTITIONS" envDefault:"6"`
	// RelayMode is the orders relays' RELAY_MODE: with wal, the relays'
	// role gets the REPLICATION attribute its replication slot needs; with
	// poll it loses it (migrate.SetRelayMode).
	RelayMode string `env:"RELAY_MODE" envDefault:"poll"`
	// DemoMerchant is the merchant of the demo API key init prints;
	// DemoAPIKeyFile is where init keeps that key ("-": nowhere, a new key
	// every run).
	DemoMerchant   string `env:"DEMO_MERCHANT" envDefault:"mer_7"`
	DemoAPIKeyFile string `env:"DEMO_API_KEY_FILE" envDefault:".paylab/demo-api-key"`
}

func loadSetupConfig() (setupConfig, error) {
	return envconfig.Load(nil, setupConfig{}, setupConfig.validate)
}

func (c setupConfig) validate() error {
	if c.TopicPartitions < 1 {
		return fmt.Errorf("configuration: ORDER_EVENTS_PARTITIONS must be at least 1, got %d", c.TopicPartitions)
	}
	if c.RelayMode != "poll" && c.RelayMode != "wal" {
		return fmt.Errorf("configuration: RELAY_MODE %q is not poll or wal", c.RelayMode)
	}
	if !apikey.ValidMerchant(c.DemoMerchant) {
		return fmt.Errorf("configuration: DEMO_MERCHANT %q is not a merchant id (1-64 of [A-Za-z0-9_-])", c.DemoMerchant)
	}
	return nil
}

func runMigrate(ctx context.Context, out io.Writer) error {
	cfg, err := loadSetupConfig()
	if err != nil {
		return err
	}
	roles, err := loadRolesConfig()
	if err != nil {
		return err
	}
	// The owners run the migrations; the processes connect as the runtime
	// roles.
	dbs := []migrate.Database{
		{Name: "orders", Role: "orders", Password: cfg.OrdersDBPassword, Runtime: roles.runtimeRoles("orders")},
		{Name: "ledger", Role: "ledger", Password: cfg.LedgerDBPassword, Runtime: roles.runtimeRoles("ledger")},
		{Name: "notifications", Role: "notifications", Password: cfg.NotificationsPassword, Runtime: roles.runtimeRoles("notifications")},
	}
	if err := migrate.Bootstrap(ctx, cfg.AdminDatabaseURL, dbs); err != nil {
		return err
	}
	for _, db := range dbs {
		dbURL, err := migrate.URL(cfg.AdminDatabaseURL, db.Name, db.Role, db.Password)
		if err != nil {
			return err
		}
		version, err := migrate.Up(ctx, dbURL, db.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "migrated %s to version %d (owner %s)\n", db.Name, version, db.Role)
		if err := grantRuntimeRoles(ctx, out, cfg.AdminDatabaseURL, dbURL, db, cfg.RelayMode, roles); err != nil {
			return err
		}
	}
	return nil
}

// runDemoKey prints the demo merchant's API key, creating it when there is
// none (ensureDemoKey), in the databases runMigrate set up.
func runDemoKey(ctx context.Context, out io.Writer) error {
	cfg, err := loadSetupConfig()
	if err != nil {
		return err
	}
	ordersURL, err := migrate.URL(cfg.AdminDatabaseURL, "orders", "orders", cfg.OrdersDBPassword)
	if err != nil {
		return err
	}
	ledgerURL, err := migrate.URL(cfg.AdminDatabaseURL, "ledger", "ledger", cfg.LedgerDBPassword)
	if err != nil {
		return err
	}
	return withKeyStore(ctx, ordersURL, ledgerURL, func(s *apikey.Store) error {
		return ensureDemoKey(ctx, s, cfg.DemoMerchant, cfg.DemoAPIKeyFile, out)
	})
}

func runTopics(_ context.Context, out io.Writer) error {
	cfg, err := loadSetupConfig()
	if err != nil {
		return err
	}
	security := broker.SecurityFromEnv()
	if err := security.Apply(sarama.NewConfig()); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	admin, err := sarama.NewClusterAdmin(broker.SplitBrokers(cfg.KafkaBrokers), broker.Config("paylab-cli"))
	if err != nil {
		return fmt.Errorf("connecting to Kafka at %s: %w", cfg.KafkaBrokers, err)
	}
	defer admin.Close()
	for _, topic := range []string{broker.OrderEvents, broker.OrderEventsDeadLetter} {
		if err := broker.EnsureTopic(admin, topic, cfg.TopicPartitions); err != nil {
			return err
		}
		r, err := broker.TopicReplication(admin, topic)
		if err != nil {
			return err
		}
		minInSync, err := broker.TopicMinInSync(admin, topic)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "topic %s ready (replication factor %d, min.insync.replicas %s)\n", topic, r.Factor, minInSync)
	}
	if security.Protocol == "SASL_SSL" {
		// A secured Kafka denies what no ACL allows: the services' own.
		if err := broker.EnsureACLs(admin); err != nil {
			return err
		}
		fmt.Fprintf(out, "ACLs ready: %s writes %s; %s and %s read it in their groups and write %s\n",
			broker.PrincipalRelay, broker.OrderEvents, broker.PrincipalLedger, broker.PrincipalNotifications, broker.OrderEventsDeadLetter)
	}
	return nil
}
