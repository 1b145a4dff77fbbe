package chaosrun

import (
	"net/url"
	"strings"
	"testing"

	"github.com/paylab/paylab/internal/platform/migrate"
)

// With RuntimeRoles each process connects to its database as its own
// runtime role, as a deployment does; WAL relays stay the owner's, whose
// scenarios drive the slot and publication.
func TestLayoutProcessesConnectAsRuntimeRoles(t *testing.T) {
	t.Parallel()
	owner := func(db string) string {
		return "postgres://" + db + ":" + db + "@127.0.0.1:1/s_" + db + "?sslmode=disable"
	}
	for _, tc := range []struct {
		name  string
		roles bool
		slot  string
		want  map[string]string // process role → database user
	}{
		{name: "runtime roles", roles: true, want: map[string]string{RoleOrders: migrate.OrdersAPI,
			RoleRelay: migrate.OrdersRelay, RoleLedger: migrate.LedgerApp, RoleNotifications: migrate.NotificationsApp}},
		{name: "WAL relays", roles: true, slot: "s", want: map[string]string{RoleOrders: migrate.OrdersAPI,
			RoleRelay: "orders", RoleLedger: migrate.LedgerApp, RoleNotifications: migrate.NotificationsApp}},
		{name: "owners", want: map[string]string{RoleOrders: "orders", RoleRelay: "orders", RoleLedger: "ledger",
			RoleNotifications: "notifications"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			specs, err := Layout{Brokers: []string{"127.0.0.1:2"}, Topic: "t", OrdersURL: owner("orders"),
				LedgerURL: owner("ledger"), NotificationsURL: owner("notifications"), RuntimeRoles: tc.roles,
				Relays: 2, RelayMode: RelayPoll, Slot: tc.slot}.Specs()
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, s := range specs {
				for _, kv := range s.Env {
					raw, ok := strings.CutPrefix(kv, "DATABASE_URL=")
					if !ok {
						continue
					}
					u, err := url.Parse(raw)
					if err != nil {
						t.Fatal(err)
					}
					pw, _ := u.User.Password()
					if u.User.Username() != tc.want[s.Role] || pw != tc.want[s.Role] || u.Host != "127.0.0.1:1" || u.Query().Get("sslmode") != "disable" {
						t.Errorf("%s connects as %s (password %q) to %s, want %s", s.Name, u.User.Username(), pw, u.Host, tc.want[s.Role])
					}
					seen[s.Role]++
				}
			}
			if seen[RoleOrders] != 1 || seen[RoleRelay] != 2 || seen[RoleLedger] != 1 || seen[RoleNotifications] != 1 {
				t.Errorf("DATABASE_URL per role: %v", seen)
			}
		})
	}
}
