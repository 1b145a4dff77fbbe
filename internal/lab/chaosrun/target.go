package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paylab/paylab/internal/lab/pgha"
	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/lab/supervise"
)

// Target is where scenarios run: the local supervisor (Env), which starts a
// fresh deployment for each scenario, or a running docker compose
// deployment (Compose). The scenarios are the same on both.
type Target interface {
	// Deploy returns the deployment scenario sc runs on, or an error
	// wrapping ErrSkip that says what sc needs and the target lacks.
	Deploy(ctx context.Context, sc Scenario) (*Deployment, error)
	// Shared reports whether every scenario runs on one long-lived
	// deployment; they then run one at a time, each judged on what it added.
	Shared() bool
}

// ErrSkip marks a scenario the target cannot run as it is.
var ErrSkip = errors.New("skipped")

func skip(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSkip, fmt.Sprintf(format, args...))
}

// Deployment is what a scenario drives and reconciles: the orders API, its
// relays, the ledger and notifications, and where their state lives.
type Deployment struct {
	APIURL        string
	Src           reconcile.Sources
	Orders        *Process
	Relays        []*Process
	Ledger        *Process   // Ledgers[0]
	Ledgers       []*Process // the ledger's instances, one consumer group
	Notifications *Process
	LedgerGroup   string        // the ledger's CONSUMER_GROUP
	LeaseTTL      time.Duration // the relays' RELAY_LEASE_TTL
	RelayMode     string        // the relays' RELAY_MODE: RelayPoll or RelayWAL
	// HA is the Patroni cluster the orders database runs on, for the
	// scenarios that fail its leader over (pgscenarios.go); nil otherwise.
	HA *pgha.Cluster

	apiKeys    apiKeys              // Keys
	servers    servers              // nil when the target cannot stop its servers
	zombie     int                  // the scenario's count for Result.Zombie
	timeline   *timeline            // while a scenario runs (timeline.go)
	supervised []*supervise.Process // the local target's processes
	stop       func()
}

// servers stops and starts the PostgreSQL server or the Kafka a deployment
// runs on, by the name a scenario's stops field gives — starting a Kafka
// cluster starts the brokers that are not running — and kills single
// brokers of the Kafka, whose node ids are 1..brokerNodes().
type servers interface {
	stopServer(name string) error
	startServer(name string) error
	brokerNodes() int
	killBroker(id int) error
}

// Relay modes (the relays' RELAY_MODE).
const (
	// RelayPoll: the relays claim rows with leases and share the work.
	RelayPoll = "poll"
	// RelayWAL: one relay streams the outbox's inserts from a replication
	// slot, holding the reader lease; the others stand by. It deletes the
	// rows it published.
	RelayWAL = "wal"
)

// Server names for Scenario.stops.
const (
	kafkaServer    = "Kafka"
	postgresServer = "PostgreSQL"
)

func (d *Deployment) all() []*Process {
	ps := append([]*Process{d.Orders, d.Notifications}, d.Ledgers...)
	return append(ps, d.Relays...)
}

// Stop ends what the target started for the deployment, if anything.
func (d *Deployment) Stop() {
	if d.stop != nil {
		d.stop()
	}
}

// disarm disarms every process's faults, waiting for each to be ready.
func (d *Deployment) disarm(ctx context.Context) error {
	var errs []error
	for _, p := range d.all() {
		errs = append(errs, p.disarm(ctx))
	}
	return errors.Join(errs...)
}
