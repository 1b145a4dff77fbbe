// Package chaosrun runs paylab's chaos scenarios: on a target (the local
// supervisor, which starts the services against private servers, or a
// running docker compose deployment) it drives payments through the API with
// the load generator, injects a fault (a crash at a step boundary, a relay
// killed, Kafka or PostgreSQL stopped), waits for the pipeline to settle and
// reconciles the three databases. Scenarios that expect the dual-write hole
// (naive mode, inbox off) fail when the hole does NOT show.
package chaosrun

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/paylab/paylab/internal/lab/pgha"
	"github.com/paylab/paylab/internal/lab/reconcile"
)

// Expect says what a scenario must show to pass.
type Expect string

const (
	// Clean: nothing lost, no phantom, no duplicate effect, nothing out of order.
	Clean Expect = "clean"
	// CleanWithWireDuplicates: clean, and duplicates did reach the wire (the
	// inbox absorbed them).
	CleanWithWireDuplicates Expect = "clean, duplicates on the wire"
	// Lost: the hole shows as lost events.
	Lost Expect = "lost > 0"
	// Phantom: the hole shows as phantom events.
	Phantom Expect = "phantom > 0"
	// DuplicateEffects: duplicates reached the effects.
	DuplicateEffects Expect = "duplicate effects > 0"
	// ZombieWrites: a stalled process, woken up, wrote what was no longer
	// its own (the protection is off).
	ZombieWrites Expect = "zombie writes > 0"
	// AcknowledgedLost: payments the API acknowledged with 201 are not in
	// the orders database (a failover to an asynchronous replica).
	AcknowledgedLost Expect = "acknowledged lost > 0"
)

// Scenario is one experiment.
type Scenario struct {
	Name        string
	Description string
	opts        options
	expect      Expect
	// minRelays is how many relays the scenario drives.
	minRelays int
	// stops names the server (kafkaServer, postgresServer) the scenario
	// stops: every scenario of a local run shares it, so the scenario runs
	// alone; no admin API can stop it, so compose cannot run it.
	stops string
	// brokers is how many Kafka brokers the scenario needs (default 1).
	brokers int
	// pauses: the scenario stops a process with SIGSTOP, which only the
	// local target can do.
	pauses bool
	// pollOnly: the scenario drives the polling relays' row leases; the
	// WAL relay's single reader is fenced by its reader lease and the slot.
	pollOnly bool
	// fullOnly leaves the scenario out of `all --quick` (make test).
	fullOnly bool
	// pg: the orders database runs on a private Patroni cluster of three
	// replicating so, started for the scenario alone (pgscenarios.go); ""
	// for the run's single PostgreSQL server.
	pg pgha.Replication
	// sizes, when set, adjusts the run's sizes for the scenario.
	sizes func(Sizes) Sizes
	// during runs while the load runs; it returns a note for the report
	// (such as a takeover time) and the recovery time it measured.
	during func(ctx context.Context, d *Deployment, s Sizes) (note string, recovery time.Duration, err error)
}

// Sizes are a run's load and fault intensity.
type Sizes struct {
	Payments int
	Rate     int
	Crashes  int           // repeated crashes per scenario
	Outage   time.Duration // how long Kafka stays down at least
	Settle   time.Duration // longest wait for the pipeline to settle
}

// Full and Quick are the default sizes (`paylab chaos run all` and `--quick`).
var (
	Full  = Sizes{Payments: 2000, Rate: 200, Crashes: 5, Outage: 35 * time.Second, Settle: 3 * time.Minute}
	Quick = Sizes{Payments: 300, Rate: 150, Crashes: 2, Outage: 5 * time.Second, Settle: 3 * time.Minute}
)

// Result is a scenario's outcome: the table's row.
type Result struct {
	Scenario string `json:"scenario"`
	Mode     string `json:"mode"`
	Expect   Expect `json:"expect"`
	Payments int    `json:"payments"` // captures committed in the orders database
	// Acknowledged counts the payments the API answered 201; AckLost
	// those of them the orders database does not hold once it settled.
	Acknowledged int `json:"acknowledged"`
	AckLost      int `json:"acknowledged_lost"`
	Lost         int `json:"lost"`
	Phantom      int `json:"phantom"`
	DupOnWire    int `json:"duplicates_on_wire"`
	DupEffects   int `json:"duplicate_effects"`
	OutOfOrder   int `json:"out_of_order"`
	// PendingOutbox counts the outbox rows neither dispatched nor parked
	// once the pipeline settled (reconcile.Backlog).
	PendingOutbox int `json:"pending_outbox"`
	// Zombie counts writes by a stalled process of what was no longer its
	// own: outcomes recorded on rows another relay held, consumer offsets
	// committed backwards.
	Zombie     int              `json:"zombie_writes"`
	Recovery   time.Duration    `json:"recovery_ns"`
	Note       string           `json:"note,omitempty"`
	Pass       bool             `json:"pass"`
	Error      string           `json:"error,omitempty"`
	Skipped    string           `json:"skipped,omitempty"` // why the target could not run it
	Report     reconcile.Report `json:"report"`
	StatusCode map[string]int   `json:"status_codes,omitempty"`
	Timeline   *Timeline        `json:"timeline,omitempty"` // the databases and the fault over time (timeline.go)
}

// mode is the configuration the scenario runs, as the table shows it.
func (sc Scenario) mode() string {
	m := sc.opts.mode
	if !sc.opts.inboxEnabled {
		m += ", inbox off"
	}
	if sc.opts.unfenced {
		m += ", unfenced"
	}
	if sc.opts.ledgers > 1 {
		m += fmt.Sprintf(", %d ledgers", sc.opts.ledgers)
	}
	switch sc.pg {
	case pgha.Synchronous:
		m += ", sync replication"
	case pgha.Asynchronous:
		m += ", async replication"
	}
	return m
}

// verdict is the table's last column.
func (r Result) verdict() string {
	switch {
	case r.Skipped != "":
		return "SKIP"
	case r.Pass:
		return "PASS"
	}
	return "FAIL"
}

// judge fills in the row's figures and verdict from the reconciliation.
func (r *Result) judge(rep reconcile.Report) {
	r.Report = rep
	r.Payments = rep.Captures
	r.Lost = max(rep.Ledger.Lost, rep.Notifications.Lost)
	r.Phantom = max(rep.Ledger.Phantom, rep.Notifications.Phantom)
	r.DupEffects = max(rep.Ledger.Duplicate, rep.Notifications.Duplicate)
	r.OutOfOrder = max(rep.Ledger.OutOfOrder, rep.Notifications.OutOfOrder)
	r.PendingOutbox = rep.Outbox.Pending
	if rep.Wire != nil {
		r.DupOnWire = rep.Wire.Duplicates
		r.OutOfOrder = max(r.OutOfOrder, rep.Wire.OutOfOrder)
	}
	clean := len(rep.Violations()) == 0 && r.Zombie == 0 && r.AckLost == 0
	switch r.Expect {
	case Clean:
		r.Pass = clean
	case CleanWithWireDuplicates:
		r.Pass = clean && r.DupOnWire > 0
	case Lost:
		r.Pass = r.Lost > 0
	case Phantom:
		r.Pass = r.Phantom > 0
	case DuplicateEffects:
		r.Pass = r.DupEffects > 0
	case ZombieWrites:
		r.Pass = r.Zombie > 0
	case AcknowledgedLost:
		r.Pass = r.AckLost > 0
	}
	// Whatever a scenario expects, an outbox row left pending is an event
	// the outbox never delivered, or delivered without recording it: no
	// scenario passes with one. (The naive modes write no outbox rows.)
	if p := rep.OutboxLeftPending(); p != "" {
		r.Pass = false
		r.Error = strings.TrimSpace(r.Error + " " + p)
	}
	if !rep.Settled {
		r.Note = strings.TrimPrefix(r.Note+"; the pipeline had not settled by the deadline: the figures are those of the last read", "; ")
	}
	if r.Payments == 0 {
		r.Pass = false
		r.Note = "no payment was committed"
	}
}
