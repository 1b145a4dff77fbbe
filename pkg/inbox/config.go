package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// Handler applies one event. It runs inside the transaction that also marks
// the event processed in the inbox, so its writes and the mark commit or roll
// back together. It must use tx for every write that belongs to the effect.
// Return Permanent(err) for an event that can never succeed (it is
// dead-lettered without further attempts); any other error is retried.
type Handler func(ctx context.Context, tx pgx.Tx, msg Message) error

// BatchHandler applies a run of events, in order, inside tx: the batch form
// of the Handlers, for effects that can be written for many events with a
// few statements. The same rules hold as for a Handler; an error fails the
// whole run (its messages are then delivered one by one, each in a run of
// its own).
type BatchHandler func(ctx context.Context, tx pgx.Tx, msgs []Message) error

// Outcome says what happened to one delivery.
type Outcome string

// Outcomes of a delivery.
const (
	Processed    Outcome = "processed"     // the handler ran and committed
	Duplicate    Outcome = "duplicate"     // seen before: skipped
	Parked       Outcome = "parked"        // recorded; waits for an earlier event of its aggregate
	DeadLettered Outcome = "dead_lettered" // sent to the dead-letter topic, inbox status failed
)

// Config configures a Runner (and Redrive, Prune, Migrate, which use only
// some of its fields). The zero value of every optional field takes the
// default documented on it; Brokers, Topic, Group and Handlers are required
// by NewRunner.
type Config struct {
	// Table is the inbox table, created by Migrations/Migrate for this name
	// together with <Table>_sequences (the applied sequence of every
	// aggregate); index names derive from it. A lower-case SQL identifier of
	// at most 40 characters. Default "inbox".
	Table string
	// MetricPrefix starts the name of every inbox metric, e.g.
	// <prefix>_processed_total. Default: the table's name.
	MetricPrefix string

	Brokers []string // Kafka bootstrap servers (required)
	Topic   string   // topic to consume (required)
	Group   string   // consumer group id (required)
	// DeadLetterTopic receives poison messages; default Topic + ".dlq".
	DeadLetterTopic string
	// Handlers maps an event type (ce_type) to its handler. A type without a
	// handler is dead-lettered with reason "unknown_type".
	Handlers map[string]Handler
	// BatchHandler, when set, applies the events instead of Handlers (which
	// still say which types are handled): with every run of events of a
	// batch, and with single events alone.
	BatchHandler BatchHandler

	// Unsafe holds switches that break a guarantee, to show what it
	// protects. Leave it zero.
	Unsafe Unsafe

	// BatchSize bounds how many messages of a partition, already fetched and
	// waiting, are processed in one transaction (one commit and a fixed
	// number of statements instead of several per message); while a
	// partition has fewer waiting, its batch is merged with other
	// partitions' waiting at the same moment, up to BatchSize in all, each
	// partition still in its order. A failing batch is rolled back and
	// retried message by message (a merged one partition by partition). Default 1: every message
	// in its own transaction. Batch only when handlers take the row locks
	// they share with other partitions' batches in one consistent order
	// (otherwise concurrent batches deadlock and fall back to one message at
	// a time) and have no side effect outside the transaction (a retried
	// batch repeats it). The consumer's channel buffer is raised to
	// BatchSize so that a full batch can be waiting.
	BatchSize int

	MaxAttempts     int           // handler attempts before dead-lettering; default 5
	RetryBackoff    time.Duration // first retry delay, doubled each time; default 100ms
	RetryMaxBackoff time.Duration // cap of the retry delay; default 2s
	HandlerTimeout  time.Duration // deadline of one attempt; default 10s

	// Retention is how long processed inbox rows are kept (measured on the
	// database clock). It must exceed the longest replay horizon (Kafka's
	// retention): a duplicate older than the window is not recognised by its
	// event id. Default 14 days (twice Kafka's default retention); negative
	// keeps rows forever.
	Retention         time.Duration
	RetentionInterval time.Duration // how often to prune; default 1m
	RetentionBatch    int           // rows deleted per statement; default 1000

	// SweepInterval is how often parked events whose gap has filled are looked
	// for (a safety net: they are normally applied right after the event that
	// fills the gap). Default 5s.
	SweepInterval time.Duration

	// Sarama is the consumer configuration to start from (copied, not
	// modified); nil means sarama.NewConfig() with Kafka protocol 3.0.
	Sarama *sarama.Config
	// ProducerSarama configures the dead-letter producer; nil derives it from
	// Sarama (acks from all in-sync replicas, successes returned).
	ProducerSarama *sarama.Config

	// AfterCommit, when set, is called after a delivery's transaction committed
	// (processed, duplicate or parked; not for a dead-lettered message) and
	// before its offset is marked: a named step boundary for fault injection
	// and tests. An error fails the attempt as a handler error does: the
	// offset stays unmarked and the message is delivered again after the
	// backoff (the inbox finds it a duplicate; with the inbox off it is
	// applied again), counted as failed, and dead-lettered once MaxAttempts
	// attempts have failed (a dead-letter finds an event already processed a
	// duplicate and leaves it be).
	AfterCommit func(ctx context.Context, msg Message, outcome Outcome) error

	Logger     *slog.Logger          // default: discard
	Registerer prometheus.Registerer // metrics; default: a private registry
}

// Unsafe switches break a guarantee of the inbox. They exist for
// demonstrations and fault tests; production code leaves them unset.
type Unsafe struct {
	// Disabled turns the inbox off: no dedupe, no ordering, every delivery
	// runs its handler.
	Disabled bool
}

// Defaults.
const (
	DefaultTable             = "inbox"
	DefaultBatchSize         = 1
	DefaultMaxAttempts       = 5
	DefaultRetryBackoff      = 100 * time.Millisecond
	DefaultRetryMaxBackoff   = 2 * time.Second
	DefaultHandlerTimeout    = 10 * time.Second
	DefaultRetention         = 14 * 24 * time.Hour
	DefaultRetentionInterval = time.Minute
	DefaultRetentionBatch    = 1000
	DefaultSweepInterval     = 5 * time.Second
	// DefaultDeadLetterSuffix is appended to Topic for the default
	// DeadLetterTopic.
	DefaultDeadLetterSuffix = ".dlq"
)

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	out := c
	out.withNames()
	if out.DeadLetterTopic == "" {
		out.DeadLetterTopic = out.Topic + DefaultDeadLetterSuffix
	}
	set := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&out.RetryBackoff, DefaultRetryBackoff)
	set(&out.RetryMaxBackoff, DefaultRetryMaxBackoff)
	set(&out.HandlerTimeout, DefaultHandlerTimeout)
	set(&out.Retention, DefaultRetention)
	set(&out.RetentionInterval, DefaultRetentionInterval)
	set(&out.SweepInterval, DefaultSweepInterval)
	if out.BatchSize == 0 {
		out.BatchSize = DefaultBatchSize
	}
	if out.MaxAttempts == 0 {
		out.MaxAttempts = DefaultMaxAttempts
	}
	if out.RetentionBatch == 0 {
		out.RetentionBatch = DefaultRetentionBatch
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Registerer == nil {
		out.Registerer = prometheus.NewRegistry()
	}
	return out
}

// withNames sets the zero names (table, metric prefix) to their defaults.
func (c *Config) withNames() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.MetricPrefix == "" {
		c.MetricPrefix = c.Table
	}
}

// metricPrefix is what Config.MetricPrefix accepts.
var metricPrefix = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// Validate reports every invalid setting: a required field missing
// (Brokers, Topic, Group, Handlers, which NewRunner needs) or a value that
// cannot work.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("inbox: Brokers is empty"))
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("inbox: Topic is empty"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("inbox: Group is empty"))
	}
	if len(c.Handlers) == 0 {
		errs = append(errs, errors.New("inbox: no Handlers"))
	}
	return errors.Join(append(errs, c.validateOptional())...)
}

// validateOptional checks the fields that have defaults.
func (c Config) validateOptional() error {
	c.withNames()
	var errs []error
	if err := validateTable(c.Table); err != nil {
		errs = append(errs, fmt.Errorf("inbox: %w", err))
	}
	if !metricPrefix.MatchString(c.MetricPrefix) {
		errs = append(errs, fmt.Errorf("inbox: metric prefix %q is not a Prometheus metric name", c.MetricPrefix))
	}
	if c.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("inbox: BatchSize %d is negative", c.BatchSize))
	}
	if c.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("inbox: MaxAttempts %d is negative", c.MaxAttempts))
	}
	if c.RetryBackoff < 0 || c.RetryMaxBackoff < 0 || c.HandlerTimeout < 0 || c.RetentionInterval < 0 || c.SweepInterval < 0 {
		errs = append(errs, errors.New("inbox: negative durations are not allowed (but for Retention)"))
	}
	if c.RetentionBatch < 0 {
		errs = append(errs, fmt.Errorf("inbox: RetentionBatch %d is negative", c.RetentionBatch))
	}
	return errors.Join(errs...)
}
