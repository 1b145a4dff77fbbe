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

// Config configures the outbox: the table, its notification channel and
// metric names (shared by NewWriter and NewRelay, so both must get the same
// values), and the relay's tuning. The zero value is usable: every zero field
// takes the default documented on it.
type Config struct {
	// Table is the outbox table, created by Migrations/Migrate for this
	// name; the names of its indexes derive from it. A lower-case SQL
	// identifier of at most 40 characters. Default "outbox".
	Table string
	// Channel is the LISTEN/NOTIFY channel Enqueue signals on commit and the
	// relay listens on. Default "paylab_outbox" for the default table, the
	// table's name otherwise.
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
	// MetricPrefix starts the name of every relay metric, e.g.
	// <prefix>_pending. Default "paylab_outbox" for the default table, the
	// table's name otherwise.
	MetricPrefix string
	// ID names this relay in lease_owner; it must differ between relays
	// running at the same time, and Run refuses one that a running relay
	// holds (ErrRelayIDInUse). Default: hostname-pid.
	ID string
	// BatchSize is how many events one claim leases. Default 500.
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
	// PollOnly turns LISTEN/NOTIFY off: the relay finds work by its poll
	// interval alone. For where LISTEN is unavailable, or to measure
	// polling. (Run's guard holds session advisory locks: a pooler must
	// keep sessions, not only transactions.) Default false: notifications
	// wake the relay as soon as an event commits.
	PollOnly bool
	// UnfencedComplete records a batch's outcome whoever holds its rows'
	// leases now. Never set it: it exists to show what the owner check
	// prevents. A relay stalled past its lease (a GC pause, SIGSTOP, a
	// frozen VM) wakes up and, unfenced, records rows another relay has
	// since leased and not yet published; fenced (the default), its record
	// of those rows is refused and counted in lease_lost_total.
	UnfencedComplete bool
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

	// Slot is the logical replication slot the WAL relay (NewWALRelay) reads.
	// Slots belong to the whole PostgreSQL server, not to one database: two
	// databases on one server with the same table name need different
	// slots. A lower-case name of letters, digits and underscores, at most
	// 63 characters. Default: the table's name + "_wal_relay".
	Slot string
	// Publication is the publication (of the table's INSERTs only) the WAL
	// relay's slot decodes. Default: the table's name + "_wal".
	Publication string
	// WALKeepDispatched makes the WAL relay keep the events it published,
	// with dispatched_at set (and deleted after Retention), as the polling
	// relay does. Default false: it deletes them, one DELETE per batch. The
	// stream already carried each event, so the row has served its purpose;
	// the UPDATE that marks it writes a new row version, its index entries
	// and their WAL (which the slot then decodes too), and more than doubles
	// PostgreSQL's CPU per event. Parked events are kept either way.
	WALKeepDispatched bool
}

// Defaults.
const (
	DefaultTable             = "outbox"
	DefaultChannel           = "paylab_outbox"
	DefaultMetricPrefix      = "paylab_outbox"
	DefaultBatchSize         = 500
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
)

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	c.withNames()
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	set := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.LeaseTTL, DefaultLeaseTTL)
	set(&c.MaxPublishWait, 4*c.LeaseTTL)
	set(&c.PollInterval, DefaultPollInterval)
	set(&c.RetryBackoff, DefaultRetryBackoff)
	set(&c.RetryMaxBackoff, DefaultRetryMaxBackoff)
	set(&c.OutageMaxBackoff, DefaultOutageMaxBackoff)
	set(&c.Retention, DefaultRetention)
	set(&c.RetentionInterval, DefaultRetentionInterval)
	set(&c.StatsInterval, DefaultStatsInterval)
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.RetentionBatch == 0 {
		c.RetentionBatch = DefaultRetentionBatch
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

// withNames sets the zero names (table, channel, metric prefix) to their
// defaults; the other fields are left as they are.
func (c *Config) withNames() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.Channel == "" {
		c.Channel = DefaultChannel
		if c.Table != DefaultTable {
			c.Channel = c.Table
		}
	}
	if c.MetricPrefix == "" {
		c.MetricPrefix = DefaultMetricPrefix
		if c.Table != DefaultTable {
			c.MetricPrefix = c.Table
		}
	}
	if c.Slot == "" {
		c.Slot = c.Table + "_wal_relay"
	}
	if c.Publication == "" {
		c.Publication = c.Table + "_wal"
	}
}

// walName is what Config.Slot and Config.Publication accept.
var walName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// metricPrefix is what Config.MetricPrefix accepts.
var metricPrefix = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// Validate reports the settings that cannot work, after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
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
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		errs = append(errs, fmt.Errorf("batch size %d is not in [1, 10000]", c.BatchSize))
	}
	if c.LeaseTTL < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("lease TTL %v is shorter than 100ms", c.LeaseTTL))
	}
	for name, d := range map[string]time.Duration{
		"poll interval": c.PollInterval, "retry backoff": c.RetryBackoff, "retry max backoff": c.RetryMaxBackoff,
		"outage max backoff": c.OutageMaxBackoff,
		"retention interval": c.RetentionInterval, "stats interval": c.StatsInterval,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", name, d))
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
	if !walName.MatchString(c.Slot) {
		errs = append(errs, fmt.Errorf("slot %q is not a name of at most 63 lower-case letters, digits and underscores", c.Slot))
	}
	if !walName.MatchString(c.Publication) {
		errs = append(errs, fmt.Errorf("publication %q is not a name of at most 63 lower-case letters, digits and underscores", c.Publication))
	}
	if len(c.ID) > 200 {
		errs = append(errs, errors.New("relay ID is longer than 200 characters"))
	}
	return errors.Join(errs...)
}

// PublishTimeout is the ack budget of a batch: half the lease TTL, so a
// batch is normally acknowledged and marked well before its lease can expire
// and another relay take the same events. A batch still waiting for
// acknowledgements then has its lease renewed (see MaxPublishWait).
func (c Config) PublishTimeout() time.Duration { return c.withDefaults().LeaseTTL / 2 }

// Hooks are optional functions called at the relay's step boundaries. One
// that returns an error fails the batch there; one that exits the process is
// a crash at that point.
type Hooks struct {
	// AfterLease runs when a batch is leased and not yet published. A crash
	// here leaves leases held by a dead relay ("relay.after_lease").
	AfterLease func(ctx context.Context) error
	// AfterPublishBeforeMark runs when the broker acknowledged the batch and
	// it is not yet marked dispatched. A crash here puts duplicates on the
	// wire ("relay.after_publish_before_mark").
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
