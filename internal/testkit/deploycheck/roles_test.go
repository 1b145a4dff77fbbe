package deploycheck

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/paylab/paylab/db/migrations"
	"github.com/paylab/paylab/internal/platform/migrate"
)

// Each service connects to its own database as its own runtime role, with
// the password init gives that role, whatever .env sets; init is told the
// relays' RELAY_MODE (REPLICATION for their role in wal mode only), and no
// service connects as a database's owner or the superuser.
func TestComposeServicesConnectAsRuntimeRoles(t *testing.T) {
	t.Parallel()
	roles := map[string]struct{ role, database string }{
		"orders":        {migrate.OrdersAPI, "orders"},
		"relay":         {migrate.OrdersRelay, "orders"},
		"ledger":        {migrate.LedgerApp, "ledger"},
		"notifications": {migrate.NotificationsApp, "notifications"},
	}
	var all []string
	for _, db := range migrations.Databases {
		all = append(all, migrate.RuntimeRoles(db)...)
	}
	for _, dotEnv := range [][]string{nil, {"RELAY_MODE=wal", "ORDERS_API_DB_PASSWORD=a1", "ORDERS_RELAY_DB_PASSWORD=r1",
		"LEDGER_APP_DB_PASSWORD=l1", "NOTIFICATIONS_APP_DB_PASSWORD=n1", "ORDERS_DB_PASSWORD=o1"}} {
		project := loadCompose(t, dotEnv...)
		init := project.Services["init"]
		var used []string
		for service, want := range roles {
			raw := env(project.Services[service], "DATABASE_URL")
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatalf("%s: %v", service, err)
			}
			pw, _ := u.User.Password()
			initPW := env(init, strings.ToUpper(want.role)+"_DB_PASSWORD")
			if u.User.Username() != want.role || u.Path != "/"+want.database || pw == "" || pw != initPW {
				t.Errorf("%v: %s connects as %s to %s with password %q; want %s to %s with init's %q",
					dotEnv, service, u.User.Username(), u.Path, pw, want.role, want.database, initPW)
			}
			used = append(used, want.role)
		}
		slices.Sort(used)
		slices.Sort(all)
		if !slices.Equal(used, all) {
			t.Errorf("the services use the runtime roles %v; migrate has %v", used, all)
		}
		if env(init, "RELAY_MODE") != env(project.Services["relay"], "RELAY_MODE") {
			t.Errorf("%v: init prepares RELAY_MODE=%s, the relays run %s", dotEnv, env(init, "RELAY_MODE"), env(project.Services["relay"], "RELAY_MODE"))
		}
	}
}
