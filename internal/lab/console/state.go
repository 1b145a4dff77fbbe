package console

import (
	"time"

	"github.com/paylab/paylab/internal/lab/reconcile"
)

// State is what the page shows, refreshed every second. It holds counts
// and names only: no address, URL or token.
type State struct {
	Target    string     `json:"target"` // local or compose
	Settings  Settings   `json:"settings"`
	FixedMode string     `json:"fixed_mode,omitempty"` // why the mode cannot be switched
	At        time.Time  `json:"at"`
	Procs     []ProcView `json:"procs"`
	Orders    OrdersView `json:"orders"`
	Outbox    OutboxView `json:"outbox"`
	Leases    []Lease    `json:"leases"`
	Kafka     KafkaView  `json:"kafka"`
	Ledger    Consumer   `json:"ledger"`
	Notify    Consumer   `json:"notifications"`
	Load      LoadView   `json:"load"`
	Verify    VerifyView `json:"verify"`
	Switching string     `json:"switching,omitempty"` // the mode being switched to
	// Problems are what could not be read this second, e.g. "the ledger
	// database does not answer".
	Problems []string `json:"problems,omitempty"`
}

// ProcView is one process: whether it answers, how often it came back.
type ProcView struct {
	Name     string   `json:"name"`
	Role     string   `json:"role"`
	Up       bool     `json:"up"`
	Restarts int      `json:"restarts"` // incarnations seen to start since the console started
	Points   []string `json:"points"`
	// Relays: events published by this incarnation, and per second.
	Published float64 `json:"published"`
	Rate      float64 `json:"rate"`
}

// OrdersView is the orders database and the API.
type OrdersView struct {
	Captures int     `json:"captures"` // committed captures
	Rate     float64 `json:"rate"`     // captures per second
	// NaivePublished counts the events the API published itself (the
	// naive modes), since it last started.
	NaivePublished float64 `json:"naive_published"`
}

// OutboxView is the outbox table.
type OutboxView struct {
	Pending    int     `json:"pending"`       // not dispatched, not parked
	OldestAge  float64 `json:"oldest_age_s"`  // of the oldest pending row, on the database clock
	Dispatched int     `json:"dispatched"`    // still in the table (the WAL relay deletes them)
	Parked     int     `json:"parked"`        // failed for good
	Rate       float64 `json:"dispatch_rate"` // rows dispatched per second
}

// Lease is what one relay holds: unexpired leases, and expired ones that
// wait for a relay to claim them again.
type Lease struct {
	Owner   string `json:"owner"`
	Held    int    `json:"held"`
	Expired int    `json:"expired"`
}

// KafkaView is the topic: the end offset of every partition.
type KafkaView struct {
	Partitions []int64 `json:"partitions"`
	Total      int64   `json:"total"`
	Rate       float64 `json:"rate"`
}

// Consumer is the ledger or notifications: its lag, its inbox and its
// effects.
type Consumer struct {
	Up           bool    `json:"up"`
	Lag          float64 `json:"lag"`           // messages behind the partitions' ends
	Processed    int     `json:"processed"`     // inbox rows processed
	Duplicates   float64 `json:"duplicates"`    // deliveries skipped as seen before, since it last started
	Parked       int     `json:"parked"`        // inbox rows waiting for an earlier event of their order
	DeadLettered int     `json:"dead_lettered"` // inbox rows failed for good
	Effects      int     `json:"effects"`       // journal entries, or receipts sent
	Rate         float64 `json:"rate"`          // effects per second
}

// LoadView is the payments the console is placing or placed last.
type LoadView struct {
	Running    bool           `json:"running"`
	Count      int            `json:"count"`
	Rate       int            `json:"rate"`
	Created    uint64         `json:"created"`
	StatusCode map[string]int `json:"status_codes,omitempty"`
	Error      string         `json:"error,omitempty"`
}

// VerifyView is the last reconciliation.
type VerifyView struct {
	Running bool   `json:"running"`
	Since   string `json:"since"` // what the counts are relative to, e.g. "the switch to naive at 10:04:05"
	Report  *Check `json:"report,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Check is a reconciliation's outcome as the page shows it.
type Check struct {
	At            time.Time         `json:"at"`
	Captures      int               `json:"captures"`
	Refunds       int               `json:"refunds"`
	Ledger        reconcile.Effects `json:"ledger"`
	Notifications reconcile.Effects `json:"notifications"`
	WireDuplicate int               `json:"wire_duplicates"`
	InboxAbsorbed int               `json:"inbox_absorbed"`
	Violations    []string          `json:"violations"`
	// Before lists the violations of the whole history, when the counts
	// are since a mode switch and earlier runs left some.
	Before []string `json:"before,omitempty"`
}
