package chaosrun

import (
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/lab/supervise"
	"github.com/paylab/paylab/internal/platform/migrate"
)

// Layout is one local deployment of paylab's processes — the orders API,
// its relays, the ledger instances and notifications — on databases and a
// topic of its own: what each process is told. A chaos scenario's
// deployment and the console's local one are both a Layout.
type Layout struct {
	Brokers  []string
	SMTPAddr string
	Token    string // CHAOS_TOKEN
	Topic    string // the dead-letter topic is Topic + ".dlq"

	// The databases, as their owners.
	OrdersURL, LedgerURL, NotificationsURL string
	// RuntimeRoles: each process connects as its runtime role
	// (migrate.RuntimeRoles, its name its password, granted its tables)
	// instead of the owner — all but WAL relays (Slot set), whose
	// scenarios switch modes and drive the slot and publication.
	RuntimeRoles bool

	APIAddr      string // the orders API's HTTP_ADDR
	Mode         string // OUTBOX_MODE
	InboxEnabled bool

	Relays    int
	RelayMode string
	LeaseTTL  time.Duration
	Unfenced  bool   // RELAY_LEASE_FENCING=false
	Slot      string // RELAY_SLOT of the WAL relay, if any

	Ledgers            int // instances in LedgerGroup; at least one
	LedgerGroup        string
	NotificationsGroup string
}

// The roles of a Layout's processes.
const (
	RoleOrders        = "orders"
	RoleRelay         = "relay"
	RoleLedger        = "ledger"
	RoleNotifications = "notifications"
)

// Spec is one process of a Layout.
type Spec struct {
	Name   string // orders, relay-<i>, ledger, ledger-<i>, notifications
	Role   string // RoleOrders, RoleRelay, RoleLedger or RoleNotifications
	Binary string // the binary: the relays run "orders relay"
	Args   []string
	Env    []string
}

// Specs lists the layout's processes, the orders API first; each ledger
// instance gets an HTTP port of its own.
func (l Layout) Specs() ([]Spec, error) {
	// Each process's environment extends these; slices.Clip makes every
	// append copy, so no two processes share a backing array.
	common := slices.Clip([]string{"KAFKA_BROKERS=" + strings.Join(l.Brokers, ","), "LOG_LEVEL=warn",
		"CHAOS_ENABLED=true", "CHAOS_TOKEN=" + l.Token})
	ordersURL, relayURL, ledgerURL, notificationsURL := l.OrdersURL, l.OrdersURL, l.LedgerURL, l.NotificationsURL
	if l.RuntimeRoles {
		var err error
		if ordersURL, err = asRole(l.OrdersURL, migrate.OrdersAPI); err != nil {
			return nil, err
		}
		if l.Slot == "" {
			if relayURL, err = asRole(l.OrdersURL, migrate.OrdersRelay); err != nil {
				return nil, err
			}
		}
		if ledgerURL, err = asRole(l.LedgerURL, migrate.LedgerApp); err != nil {
			return nil, err
		}
		if notificationsURL, err = asRole(l.NotificationsURL, migrate.NotificationsApp); err != nil {
			return nil, err
		}
	}
	ordersEnv := append(common,
		"DATABASE_URL="+ordersURL, "ORDERS_TOPIC="+l.Topic, "OUTBOX_MODE="+l.Mode, "HTTP_ADDR="+l.APIAddr)
	if l.Mode == "naive-publish-first" {
		// Its transactions hold their connection through a Kafka publish:
		// on a busy machine the pool's 2 s acquire timeout would answer
		// most payments 503 before they reach the fault point the scenario
		// measures. They queue instead, as they did before the timeout.
		ordersEnv = append(ordersEnv, "DATABASE_ACQUIRE_TIMEOUT=30s")
	}
	specs := []Spec{{Name: "orders", Role: "orders", Binary: "orders", Env: ordersEnv}}

	relayEnv := slices.Clip(append(common, "RELAY_MODE="+l.RelayMode,
		"RELAY_LEASE_TTL="+l.LeaseTTL.String(), "RELAY_POLL_INTERVAL=250ms", "RELAY_STATS_INTERVAL=1s",
		"RELAY_LEASE_FENCING="+strconv.FormatBool(!l.Unfenced)))
	if l.Slot != "" {
		relayEnv = slices.Clip(append(relayEnv, "RELAY_SLOT="+l.Slot))
	}
	for i := range l.Relays {
		// Each relay's sessions carry its name (application_name), as its
		// leases do (lease_owner): a scenario can tell who wrote a row.
		id := fmt.Sprintf("relay-%d", i)
		specs = append(specs, Spec{Name: id, Role: RoleRelay, Binary: "orders", Args: []string{"relay"}, Env: append(relayEnv,
			"RELAY_ID="+id, "DATABASE_URL="+withParam(relayURL, "application_name", id))})
	}

	consumer := slices.Clip(append(common, "ORDERS_TOPIC="+l.Topic, "DEAD_LETTER_TOPIC="+l.Topic+".dlq",
		"INBOX_ENABLED="+strconv.FormatBool(l.InboxEnabled)))
	for i := range max(l.Ledgers, 1) {
		port, err := localstack.FreePort()
		if err != nil {
			return nil, err
		}
		name := "ledger"
		if i > 0 {
			name = fmt.Sprintf("ledger-%d", i)
		}
		specs = append(specs, Spec{Name: name, Role: RoleLedger, Binary: "ledger", Env: append(consumer,
			"DATABASE_URL="+ledgerURL, "CONSUMER_GROUP="+l.LedgerGroup, fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", port))})
	}
	specs = append(specs, Spec{Name: "notifications", Role: RoleNotifications, Binary: "notifications", Env: append(consumer,
		"DATABASE_URL="+notificationsURL, "CONSUMER_GROUP="+l.NotificationsGroup, "SMTP_ADDR="+l.SMTPAddr)})
	return specs, nil
}

// asRole rewrites the database URL dbURL to connect as the runtime role
// named role, with its development password (its name).
func asRole(dbURL, role string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("parsing a database URL: %w", err)
	}
	u.User = url.UserPassword(role, role)
	return u.String(), nil
}

// Supervise prepares a supervised run of the spec from the binaries in bin,
// restarted whenever it exits, with an admin listener on a free port (its
// URL is returned) and its output in log.
func (s Spec) Supervise(bin string, log io.Writer) (*supervise.Process, string, error) {
	port, err := localstack.FreePort()
	if err != nil {
		return nil, "", err
	}
	adminURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	return &supervise.Process{
		Name: s.Name, Path: filepath.Join(bin, s.Binary), Args: s.Args,
		Env:      append(slices.Clip(s.Env), fmt.Sprintf("ADMIN_ADDR=127.0.0.1:%d", port)),
		ReadyURL: adminURL + "/readyz", Restart: true, Log: log,
	}, adminURL, nil
}
