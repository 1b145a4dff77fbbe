package console

import (
	"context"
	"errors"
	"strings"

	"github.com/paylab/paylab/internal/lab/chaosrun"
	"github.com/paylab/paylab/internal/lab/reconcile"
)

// Roles of the processes, which name their fault points' prefix: those of
// a local deployment (chaosrun.Layout).
const (
	RoleOrders        = chaosrun.RoleOrders
	RoleRelay         = chaosrun.RoleRelay
	RoleLedger        = chaosrun.RoleLedger
	RoleNotifications = chaosrun.RoleNotifications
)

// The relays' modes (RELAY_MODE): RelayPoll claims rows with leases,
// RelayWAL streams a replication slot, one reader and standbys.
const (
	RelayPoll = chaosrun.RelayPoll
	RelayWAL  = chaosrun.RelayWAL
)

// ModeOutbox is the orders API's default OUTBOX_MODE.
const ModeOutbox = "outbox"

// Modes lists the orders API's OUTBOX_MODE values in the order the page
// offers them.
var Modes = chaosrun.OutboxModes

// Proc is one process the console shows and drives through its admin
// listener. Admin stays on the server: the page knows processes by Name.
type Proc struct {
	Name  string // orders, relay-0, relay-1, ledger, notifications
	Role  string // RoleOrders, RoleRelay, RoleLedger or RoleNotifications
	Admin string // base URL of the admin listener
}

// Deployment is what the console watches and drives.
type Deployment interface {
	// Target names the deployment: "local" or "compose".
	Target() string
	// Procs returns the processes as they are now (a compose deployment's
	// relays are looked up again).
	Procs(ctx context.Context) []Proc
	// APIURL is the orders API, where payments are placed.
	APIURL() string
	// Sources are the databases and the topic, for the counters and the
	// reconciliation.
	Sources() reconcile.Sources
	// Settings are the mode, inbox and relay settings the processes run with.
	Settings() Settings
	// SwitchMode restarts the orders API in mode; it returns an error
	// wrapping ErrFixedMode where the deployment cannot.
	SwitchMode(ctx context.Context, mode string) error
	// FixedMode says why the mode cannot be switched, or "" when it can.
	FixedMode() string
}

// Settings are a deployment's configuration as the page shows it.
type Settings struct {
	Mode      string `json:"mode"` // the orders API's OUTBOX_MODE
	Inbox     bool   `json:"inbox"`
	RelayMode string `json:"relay_mode"`
}

// ErrFixedMode: the deployment runs the mode its configuration gives.
var ErrFixedMode = errors.New("the mode cannot be switched here")

// points are the fault points of each role, as the services declare them
// (a process lists those of every package its binary links; the page shows
// each process the ones of its own step boundaries).
var points = map[string][]string{
	RoleOrders:        {"orders.before_commit", "orders.after_commit_before_publish", "orders.after_publish_before_commit"},
	RoleRelay:         {"relay.after_lease", "relay.after_publish_before_mark"},
	RoleLedger:        {"ledger.after_apply_before_commit", "ledger.after_apply_before_offset_commit"},
	RoleNotifications: {"notifications.after_send_before_mark", "notifications.after_mark_before_offset_commit"},
}

// Points returns the fault points the processes of role declare.
func Points(role string) []string { return points[role] }

// pollOnly are the relay's fault points only the polling relay reaches: the
// WAL relay leases no rows, so outbox.Hooks.AfterLease never runs there.
var pollOnly = map[string]bool{"relay.after_lease": true}

// PointsIn returns the fault points the page offers on a process of role
// when the relays run relayMode: those it can reach.
func PointsIn(role, relayMode string) []string {
	if role != RoleRelay || relayMode != RelayWAL {
		return points[role]
	}
	var reached []string
	for _, p := range points[role] {
		if !pollOnly[p] {
			reached = append(reached, p)
		}
	}
	return reached
}

// ownPoint reports whether point is one of role's.
func ownPoint(role, point string) bool {
	return strings.HasPrefix(point, role+".")
}
