package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/paylab/paylab/internal/platform/envconfig"
	"github.com/paylab/paylab/internal/platform/migrate"
)

// rolesConfig holds the passwords of the runtime roles the processes
// connect as (migrate.RuntimeRoles) and the WAL relay's names. The
// defaults are the local stack's development passwords: each role's name.
type rolesConfig struct {
	OrdersAPIPassword        string `env:"ORDERS_API_DB_PASSWORD" envDefault:"orders_api" redact:"value"`
	OrdersRelayPassword      string `env:"ORDERS_RELAY_DB_PASSWORD" envDefault:"orders_relay" redact:"value"`
	LedgerAppPassword        string `env:"LEDGER_APP_DB_PASSWORD" envDefault:"ledger_app" redact:"value"`
	NotificationsAppPassword string `env:"NOTIFICATIONS_APP_DB_PASSWORD" envDefault:"notifications_app" redact:"value"`
	// RelaySlot and RelayPublication are the relays' RELAY_SLOT and
	// RELAY_PUBLICATION: init creates the publication in WAL mode, and
	// drops both when the relays poll.
	RelaySlot        string `env:"RELAY_SLOT"`
	RelayPublication string `env:"RELAY_PUBLICATION"`
}

func loadRolesConfig() (rolesConfig, error) {
	return envconfig.Load(nil, rolesConfig{}, func(rolesConfig) error { return nil })
}

// runtimeRoles returns the runtime roles of database with their passwords.
func (c rolesConfig) runtimeRoles(database string) []migrate.Role {
	passwords := map[string]string{
		migrate.OrdersAPI:        c.OrdersAPIPassword,
		migrate.OrdersRelay:      c.OrdersRelayPassword,
		migrate.LedgerApp:        c.LedgerAppPassword,
		migrate.NotificationsApp: c.NotificationsAppPassword,
	}
	var roles []migrate.Role
	for _, name := range migrate.RuntimeRoles(database) {
		roles = append(roles, migrate.Role{Name: name, Password: passwords[name]})
	}
	return roles
}

// grantRuntimeRoles gives the runtime roles of the migrated database db
// (at dbURL, as its owner) their tables and, for the orders database,
// prepares the relays' mode; it reports the roles on out.
func grantRuntimeRoles(ctx context.Context, out io.Writer, adminURL, dbURL string, db migrate.Database, relayMode string, c rolesConfig) error {
	if err := migrate.Grant(ctx, dbURL, db.Name); err != nil {
		return err
	}
	var names []string
	for _, r := range db.Runtime {
		names = append(names, r.Name)
	}
	if db.Name == "orders" {
		if err := migrate.SetRelayMode(ctx, adminURL, dbURL, relayMode,
			migrate.WAL{Slot: c.RelaySlot, Publication: c.RelayPublication}); err != nil {
			return err
		}
		for i, n := range names {
			if n == migrate.OrdersRelay && relayMode == migrate.RelayWAL {
				names[i] += " with REPLICATION"
			}
		}
	}
	fmt.Fprintf(out, "  %s: runtime roles %s (DML on their tables only)\n", db.Name, strings.Join(names, ", "))
	return nil
}
