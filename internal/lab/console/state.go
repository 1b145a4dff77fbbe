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
	Leases    []Lease    `json:"leases"`        // poll mode
	WAL       *WALView   `json:"wal,omitempty"` // WAL mode
	Kafka     KafkaView  `json:"kafka"`
	Ledger    Consumer   `json:"ledger"`
	Notify    Consumer   `json:"notifications"`
	Load      LoadView   `json:"load"`
	Verify    VerifyView `json:"verify"`
	Switching string     `json:"switching,omitempty"` // the mode being switched to
	// Problems are what could not be read this second, e.g. "the ledger
	// database does not answer", and what is broken, e.g. a lost
	// replication slot.
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
	// WALRole is a WAL relay's part, from its active-reader gauge:
	// WALReader while it holds the reader lease and streams the slot,
	// WALStandby while it waits for the lease; "" for a polling relay or
	// one whose metrics could not be read.
	WALRole string `json:"wal_role,omitempty"`
}

// The parts of a WAL relay (ProcView.WALRole).
const (
	WALReader  = "reader"
	WALStandby = "standby"
)

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

// WALView is the WAL relays' replication slot and reader lease: the row of
// outbox_wal_readers and the slot's entry in pg_replication_slots.
type WALView struct {
	// Slot is the slot's name; "" until a relay has set it up.
	Slot string `json:"slot"`
	// Owner holds the reader lease (its RELAY_ID); "" when none does.
	// LeaseLeft is how long the lease still runs, on the database clock:
	// negative once it expired, when a standby may take it over.
	Owner     string  `json:"owner"`
	LeaseLeft float64 `json:"lease_left_s"`
	// Exists is false while the slot is missing from the server (dropped,
	// or not created yet); the fields below are then empty.
	Exists bool `json:"exists"`
	// Active: a reader is connected to the slot and streams it.
	Active bool `json:"active"`
	// WALStatus is pg_replication_slots.wal_status: reserved or extended
	// while the WAL the slot needs is kept, unreserved past
	// max_slot_wal_keep_size, lost once it was removed (the slot can no
	// longer be streamed).
	WALStatus string `json:"wal_status"`
	// ConfirmedLSN is the position the reader confirmed (everything
	// before it is published); RestartLSN the oldest WAL the slot keeps.
	ConfirmedLSN string `json:"confirmed_flush_lsn"`
	RestartLSN   string `json:"restart_lsn"`
	// LagBytes is the WAL written since the confirmed position;
	// RetainedBytes the WAL the server keeps for the slot.
	LagBytes      int64 `json:"lag_bytes"`
	RetainedBytes int64 `json:"retained_bytes"`
	// SafeBytes is how much more WAL may be written before the slot is
	// lost (pg_replication_slots.safe_wal_size); nil without a limit.
	SafeBytes *int64 `json:"safe_wal_bytes,omitempty"`
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
