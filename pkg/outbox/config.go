package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config names an outbox: its table and what derives from it. NewWriter,
// NewNotifier and Migrate take it; the relays' configurations (RelayConfig,
// WALConfig) repeat its names, which must be the same. The zero value is
// usable: every zero field takes the default documented on it.
type Config struct {
	// Table is the outbox table, created by Migrations/Migrate for this
	// name; the names of its indexes derive from it. A lower-case SQL
	// identifier of at most 40 characters. Default "outbox".
	Table string
	// Channel is the LISTEN/NOTIFY channel Enqueue signals on commit and the
	// relay listens on. Default: the table's name.
	Channel string
	// NotifyAfterCommit takes the NOTIFY out of the writers' transactions:
	// Enqueue only inserts, and the process wakes the relays through a
	// Notifier after each commit. PostgreSQL serialises the commits of all
	// transactions that NOTIFY on one database-wide lock; under concurrent
	// writes that lock, not the INSERT, bounds the capture throughput (it
	// costs about 40 % of it on two cores). The Notifier sends one NOTIFY at
	// a time from its own connection, folding every commit made meanwhile
	// into the next one. A commit whose Notify is never called still reaches
	// the relays by polling (PollInterval). Default false: one NOTIFY inside
	// each transaction, nothing for the caller to do after commit. The
	// relays are configured the same either way.
	NotifyAfterCommit bool
	// NotifyInterval is the Notifier's shortest time between two NOTIFYs:
	// the Notify calls meanwhile fold into the next. The first after a
	// quiet spell is sent at once. A relay claims no more often than its
	// RoundInterval anyway; each NOTIFY costs a transaction on the server
	// and a wake-up of every listening relay. Default 5ms; negative: one
	// NOTIFY as soon as the last one is sent.
	NotifyInterval time.Duration
	// MetricPrefix starts the name of every relay metric, e.g.
	// <prefix>_pending. Default: the table's name.
	MetricPrefix string
}

// RelayConfig returns a polling relay's configuration for this outbox: its
// names set, every other field zero (its default).
func (c Config) RelayConfig() RelayConfig {
	return RelayConfig{Table: c.Table, Channel: c.Channel, MetricPrefix: c.MetricPrefix}
}

// WALConfig returns a WAL relay's configuration for this outbox: its names
// set, every other field zero (its default).
func (c Config) WALConfig() WALConfig {
	return WALConfig{Table: c.Table, Channel: c.Channel, MetricPrefix: c.MetricPrefix}
}

// RelayConfig configures the polling relay (NewRelay). The zero value is
// usable: every zero field takes the default documented on it.
type RelayConfig struct {
	// Table, Channel and MetricPrefix are the outbox's names, as in Config:
	// give the relay the same ones as the Writer.
	Table        string
	Channel      string
	MetricPrefix string
	// ID names this relay in lease_owner; it must differ between relays
	// running at the same time, and Run refuses one that a running relay
	// holds (ErrRelayIDInUse). Default: hostname-pid.
	ID string
	// BatchSize is how many events one claim leases. A round costs the same
	// few statements, a produce round trip and a mark whatever it carries,
	// so a backlog drains faster in larger batches (on two cores, 1 000 000
	// events: 31 000 events/s in batches of 500, 41 000 in 2000, 45 000 in
	// 5000); a relay that dies leaves up to a batch waiting for its lease
	// to expire, and published a second time. Under a steady stream the
	// batches are as small as RoundInterval makes them. Default 2000.
	BatchSize int
	// LeaseTTL is how long a claimed batch belongs to this relay. If the
	// relay dies, its events are published by another relay after the lease
	// expires. A batch normally gets half the TTL to be acknowledged (see
	// PublishTimeout); the other half is the safety margin. Default 30s.
	LeaseTTL time.Duration
	// MaxPublishWait bounds how long a batch waits for the publisher's
	// verdict. Past PublishTimeout the relay renews its lease every half TTL
	// while acknowledgements are pending rather than give up on events that
	// are still in the producer (and may yet be sent); past MaxPublishWait it
	// gives up, and the unacknowledged events are retried. Keep the
	// producer's own timeouts and retries well below it. Default 4×LeaseTTL.
	MaxPublishWait time.Duration
	// PollInterval is how often the relay looks for work without a
	// notification: the fallback for lost notifications, and the pace at
	// which expired leases and retry backoffs are noticed. Default 1s.
	PollInterval time.Duration
	// RoundInterval is the shortest time between the starts of two claims
	// when the last batch was not full (a backlog drains without pause).
	// Under a steady stream of events a round then takes what committed
	// during the interval: fewer, fuller rounds, each of which costs two
	// statements, a produce request and the consumers' fetches, for at most
	// RoundInterval more latency; an event after a quiet spell is claimed at
	// once. Default 20ms (the trade-off measured: docs/performance.md);
	// negative: a round as soon as the last one ended.
	RoundInterval time.Duration
	// PollOnly turns LISTEN/NOTIFY off: the relay finds work by its poll
	// interval alone. For where LISTEN is unavailable, or to measure
	// polling. (Run's guard holds session advisory locks: a pooler must
	// keep sessions, not only transactions.) Default false: notifications
	// wake the relay as soon as an event commits.
	PollOnly bool
	// RetryBackoff is the first delay before an event that failed to publish
	// is retried; it doubles with every attempt, with jitter (×0.5–1.0), up
	// to RetryMaxBackoff. Defaults 1s and 1m.
	RetryBackoff    time.Duration
	RetryMaxBackoff time.Duration
	// OutageMaxBackoff caps the relay's pause during a broker outage (a
	// batch in which every event failed, none permanently; see doc.go): the
	// relay then pauses RetryBackoff, doubling with each consecutive outage
	// batch, up to OutageMaxBackoff, and releases the batch's events for the
	// same time. It bounds how late the backlog starts draining once the
	// broker is back. Probing much more often gains little with sarama,
	// whose per-broker circuit breaker fails sends fast for 10s after 3
	// errors. Default 5s.
	OutageMaxBackoff time.Duration
	// MaxAttempts parks an event after that many failed publish attempts.
	// Errors wrapping ErrPermanent park it at once. Attempts in a broker
	// outage do not count. Default 100 (more than an hour and a half of
	// retries at the default backoff); negative means never.
	MaxAttempts int
	// Retention is how long dispatched events are kept before they are
	// deleted; negative disables deletion. Default 168h (7 days).
	Retention time.Duration
	// DeleteDispatched makes the relay delete each event Kafka acknowledged,
	// in the statement that records the batch, instead of setting its
	// dispatched_at: the table then keeps no history of published events
	// (parked ones stay), and each event costs it one write after its insert
	// instead of two (the mark's new row version and its index entries),
	// which is what bounds a large backlog's drain. Leases, their fencing
	// (only rows the relay still holds are deleted) and per-aggregate order
	// are unchanged. Default false: events are kept for Retention, as the
	// architecture's outbox does.
	DeleteDispatched bool
	// RetentionInterval is how often the retention job runs. Default 1m.
	RetentionInterval time.Duration
	// RetentionBatch is how many rows one DELETE removes, so retention never
	// holds long locks or makes huge transactions. Default 1000.
	RetentionBatch int
	// StatsInterval is how often the pending gauges are refreshed. Default 5s.
	StatsInterval time.Duration
	// Logger receives the relay's logs. Default: discarded.
	Logger *slog.Logger
	// Registerer receives the relay's metrics. Default: not exported.
	Registerer prometheus.Registerer
	// Hooks are called at the relay's step boundaries, for fault injection
	// and tests. Default: none.
	Hooks Hooks
	// Unsafe holds switches that break a guarantee, to show what it
	// protects. Leave it zero.
	Unsafe Unsafe
}

// Unsafe switches break a guarantee of the relay. They exist for
// demonstrations and fault tests; production code leaves them unset.
type Unsafe struct {
	// UnfencedComplete records a batch's outcome whoever holds its rows'
	// leases now. A relay stalled past its lease (a GC pause, SIGSTOP, a
	// frozen VM) wakes up and, unfenced, records rows another relay has
	// since leased and not yet published; fenced (the default), its record
	// of those rows is refused and counted in lease_lost_total.
	UnfencedComplete bool
}

// WALConfig configures the WAL relay (NewWALRelay), SetupWAL and DropWAL.
// The zero value is usable: every zero field takes the default documented
// on it. The fields it shares with RelayConfig mean the same there, except
// where said.
type WALConfig struct {
	// Table, Channel and MetricPrefix are the outbox's names, as in Config:
	// give the relay the same ones as the Writer.
	Table        string
	Channel      string
	MetricPrefix string
	// ID names this relay in the reader lease; as RelayConfig.ID.
	ID string
	// Slot is the logical replication slot the relay reads. Slots belong
	// to the whole PostgreSQL server, not to one database: two databases
	// on one server with the same table name need different slots. A
	// lower-case name of letters, digits and underscores, at most 63
	// characters. Default: the table's name + "_wal_relay".
	Slot string
	// Publication is the publication (of the table's INSERTs only) the
	// slot decodes. Default: the table's name + "_wal".
	Publication string
	// KeepDispatched makes the relay keep the events it published, with
	// dispatched_at set (and deleted after Retention), as the polling relay
	// does. Default false: it deletes them, one DELETE per batch. The
	// stream already carried each event, so the row has served its purpose;
	// the UPDATE that marks it writes a new row version, its index entries
	// and their WAL (which the slot then decodes too), and more than doubles
	// PostgreSQL's CPU per event. Parked events are kept either way.
	KeepDispatched bool
	// StandbyGuard is whether the relay waits, before it publishes a
	// streamed transaction, until every synchronous standby has flushed its
	// commit, so that no failover leaves its events published and the
	// transaction gone (see StandbyGuard). Default StandbyGuardAuto: while
	// the server has synchronous standbys.
	StandbyGuard StandbyGuard
	// BatchSize is how many streamed events one publish round holds.
	// Default DefaultWALBatchSize.
	BatchSize int
	// LeaseTTL is how long the reader lease lasts without renewal: a
	// standby takes over that long after the reader died. Default 30s.
	LeaseTTL time.Duration
	// MaxPublishWait, PollInterval (how often a standby tries the lease,
	// and the fallback's pace), RetryBackoff, RetryMaxBackoff,
	// OutageMaxBackoff, MaxAttempts, Retention (of parked and, with
	// KeepDispatched, dispatched events), RetentionInterval,
	// RetentionBatch, StatsInterval, Logger, Registerer and Hooks: as in
	// RelayConfig.
	MaxPublishWait    time.Duration
	PollInterval      time.Duration
	RetryBackoff      time.Duration
	RetryMaxBackoff   time.Duration
	OutageMaxBackoff  time.Duration
	MaxAttempts       int
	Retention         time.Duration
	RetentionInterval time.Duration
	RetentionBatch    int
	StatsInterval     time.Duration
	Logger            *slog.Logger
	Registerer        prometheus.Registerer
	Hooks             Hooks
}

// settings are what the two relays share, after defaults.
type settings struct {
	ID                string
	BatchSize         int
	LeaseTTL          time.Duration
	MaxPublishWait    time.Duration
	PollInterval      time.Duration
	RetryBackoff      time.Duration
	RetryMaxBackoff   time.Duration
	OutageMaxBackoff  time.Duration
	MaxAttempts       int
	Retention         time.Duration
	RetentionInterval time.Duration
	RetentionBatch    int
	StatsInterval     time.Duration
	Logger            *slog.Logger
	Registerer        prometheus.Registerer
	Hooks             Hooks
}

// relayConfig is what a relay runs with, after defaults: RelayConfig or
// WALConfig flattened, the other relay's fields left zero.
type relayConfig struct {
	Config
	settings
	PollOnly      bool
	RoundInterval time.Duration
	Unsafe        Unsafe
	// DeleteDispatched: published rows are deleted, not marked
	// (RelayConfig.DeleteDispatched; the WAL relay's default, undone by
	// WALConfig.KeepDispatched).
	DeleteDispatched bool
	Slot             string
	Publication      string
}

// Defaults.
const (
	DefaultTable             = "outbox"
	DefaultBatchSize         = 2000
	DefaultLeaseTTL          = 30 * time.Second
	DefaultPollInterval      = time.Second
	DefaultRetryBackoff      = time.Second
	DefaultRetryMaxBackoff   = time.Minute
	DefaultOutageMaxBackoff  = 5 * time.Second
	DefaultMaxAttempts       = 100
	DefaultRetention         = 7 * 24 * time.Hour
	DefaultRetentionInterval = time.Minute
	DefaultRetentionBatch    = 1000
	DefaultStatsInterval     = 5 * time.Second
	DefaultRoundInterval     = 20 * time.Millisecond
	DefaultNotifyInterval    = 5 * time.Millisecond
)

// withNames sets the zero names (table, channel, metric prefix) to their
// defaults.
func (c *Config) withNames() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.Channel == "" {
		c.Channel = c.Table
	}
	if c.MetricPrefix == "" {
		c.MetricPrefix = c.Table
	}
}

// withDefaults returns s with its zero fields set to the defaults, with
// batch as the default batch size.
func (s settings) withDefaults(batch int) settings {
	if s.ID == "" {
		host, _ := os.Hostname()
		s.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	set := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&s.LeaseTTL, DefaultLeaseTTL)
	set(&s.MaxPublishWait, 4*s.LeaseTTL)
	set(&s.PollInterval, DefaultPollInterval)
	set(&s.RetryBackoff, DefaultRetryBackoff)
	set(&s.RetryMaxBackoff, DefaultRetryMaxBackoff)
	set(&s.OutageMaxBackoff, DefaultOutageMaxBackoff)
	set(&s.Retention, DefaultRetention)
	set(&s.RetentionInterval, DefaultRetentionInterval)
	set(&s.StatsInterval, DefaultStatsInterval)
	if s.BatchSize == 0 {
		s.BatchSize = batch
	}
	if s.MaxAttempts == 0 {
		s.MaxAttempts = DefaultMaxAttempts
	}
	if s.RetentionBatch == 0 {
		s.RetentionBatch = DefaultRetentionBatch
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Registerer == nil {
		s.Registerer = prometheus.NewRegistry()
	}
	return s
}

// pacing is a pacing interval after defaults: def when d is zero, none
// (zero) when d is negative.
func pacing(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// relay is the polling relay's configuration after defaults.
func (c RelayConfig) relay() relayConfig {
	names := Config{Table: c.Table, Channel: c.Channel, MetricPrefix: c.MetricPrefix}
	names.withNames()
	return relayConfig{Config: names, PollOnly: c.PollOnly, RoundInterval: pacing(c.RoundInterval, DefaultRoundInterval), Unsafe: c.Unsafe, DeleteDispatched: c.DeleteDispatched, settings: settings{
		ID: c.ID, BatchSize: c.BatchSize, LeaseTTL: c.LeaseTTL, MaxPublishWait: c.MaxPublishWait,
		PollInterval: c.PollInterval, RetryBackoff: c.RetryBackoff, RetryMaxBackoff: c.RetryMaxBackoff,
		OutageMaxBackoff: c.OutageMaxBackoff, MaxAttempts: c.MaxAttempts, Retention: c.Retention,
		RetentionInterval: c.RetentionInterval, RetentionBatch: c.RetentionBatch,
		StatsInterval: c.StatsInterval, Logger: c.Logger, Registerer: c.Registerer, Hooks: c.Hooks,
	}.withDefaults(DefaultBatchSize)}
}

// relay is the WAL relay's configuration after defaults.
func (c WALConfig) relay() relayConfig {
	names := Config{Table: c.Table, Channel: c.Channel, MetricPrefix: c.MetricPrefix}
	names.withNames()
	if c.Slot == "" {
		c.Slot = names.Table + "_wal_relay"
	}
	if c.Publication == "" {
		c.Publication = names.Table + "_wal"
	}
	return relayConfig{Config: names, Slot: c.Slot, Publication: c.Publication, DeleteDispatched: !c.KeepDispatched, settings: settings{
		ID: c.ID, BatchSize: c.BatchSize, LeaseTTL: c.LeaseTTL, MaxPublishWait: c.MaxPublishWait,
		PollInterval: c.PollInterval, RetryBackoff: c.RetryBackoff, RetryMaxBackoff: c.RetryMaxBackoff,
		OutageMaxBackoff: c.OutageMaxBackoff, MaxAttempts: c.MaxAttempts, Retention: c.Retention,
		RetentionInterval: c.RetentionInterval, RetentionBatch: c.RetentionBatch,
		StatsInterval: c.StatsInterval, Logger: c.Logger, Registerer: c.Registerer, Hooks: c.Hooks,
	}.withDefaults(DefaultWALBatchSize)}
}

// walName is what WALConfig.Slot and WALConfig.Publication accept.
var walName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// metricPrefix is what Config.MetricPrefix accepts.
var metricPrefix = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// Validate reports every name that cannot work, after defaults.
func (c Config) Validate() error {
	c.withNames()
	var errs []error
	if err := validateTable(c.Table); err != nil {
		errs = append(errs, err)
	}
	if len(c.Channel) > 63 {
		errs = append(errs, fmt.Errorf("channel %q is longer than 63 characters", c.Channel))
	}
	if !metricPrefix.MatchString(c.MetricPrefix) {
		errs = append(errs, fmt.Errorf("metric prefix %q is not a Prometheus metric name", c.MetricPrefix))
	}
	return errors.Join(errs...)
}

// Validate reports every setting that cannot work, after defaults.
func (c RelayConfig) Validate() error { return c.relay().validate() }

// Validate reports every setting that cannot work, after defaults.
func (c WALConfig) Validate() error {
	return errors.Join(c.relay().validate(), c.StandbyGuard.validate())
}

// validate reports every setting of c (after defaults) that cannot work.
func (c relayConfig) validate() error {
	errs := []error{c.Config.Validate()}
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		errs = append(errs, fmt.Errorf("batch size %d is not in [1, 10000]", c.BatchSize))
	}
	if c.LeaseTTL < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("lease TTL %v is shorter than 100ms", c.LeaseTTL))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"poll interval", c.PollInterval}, {"retry backoff", c.RetryBackoff}, {"retry max backoff", c.RetryMaxBackoff},
		{"outage max backoff", c.OutageMaxBackoff}, {"retention interval", c.RetentionInterval}, {"stats interval", c.StatsInterval},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", d.name, d.v))
		}
	}
	if c.MaxPublishWait < c.LeaseTTL/2 {
		errs = append(errs, fmt.Errorf("max publish wait %v is shorter than half the lease TTL %v", c.MaxPublishWait, c.LeaseTTL))
	}
	if c.RetryMaxBackoff < c.RetryBackoff {
		errs = append(errs, fmt.Errorf("retry max backoff %v is shorter than retry backoff %v", c.RetryMaxBackoff, c.RetryBackoff))
	}
	if c.RetentionBatch < 1 {
		errs = append(errs, fmt.Errorf("retention batch %d is not positive", c.RetentionBatch))
	}
	if len(c.ID) > 200 {
		errs = append(errs, errors.New("relay ID is longer than 200 characters"))
	}
	if c.Slot != "" || c.Publication != "" { // a WAL relay's
		if !walName.MatchString(c.Slot) {
			errs = append(errs, fmt.Errorf("slot %q is not a name of at most 63 lower-case letters, digits and underscores", c.Slot))
		}
		if !walName.MatchString(c.Publication) {
			errs = append(errs, fmt.Errorf("publication %q is not a name of at most 63 lower-case letters, digits and underscores", c.Publication))
		}
	}
	return errors.Join(errs...)
}

// PublishTimeout is the ack budget of a batch: half the lease TTL, so a
// batch is normally acknowledged and marked well before its lease can expire
// and another relay take the same events. A batch still waiting for
// acknowledgements then has its lease renewed (see MaxPublishWait).
func (c RelayConfig) PublishTimeout() time.Duration { return c.relay().publishTimeout() }

func (s settings) publishTimeout() time.Duration { return s.LeaseTTL / 2 }

// Hooks are optional functions called at the relay's step boundaries. One
// that returns an error fails the batch there; one that exits the process is
// a crash at that point.
type Hooks struct {
	// AfterLease runs when a batch is leased and not yet published. A crash
	// here leaves leases held by a dead relay.
	AfterLease func(ctx context.Context) error
	// AfterPublishBeforeMark runs when the broker acknowledged the batch and
	// it is not yet marked dispatched. A crash here puts duplicates on the
	// wire.
	AfterPublishBeforeMark func(ctx context.Context) error
}

func (h Hooks) afterLease(ctx context.Context) error {
	if h.AfterLease == nil {
		return nil
	}
	return h.AfterLease(ctx)
}

func (h Hooks) afterPublishBeforeMark(ctx context.Context) error {
	if h.AfterPublishBeforeMark == nil {
		return nil
	}
	return h.AfterPublishBeforeMark(ctx)
}
