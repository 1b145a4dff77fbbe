package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

// Runner consumes a topic as a member of a consumer group and feeds every
// message through the inbox to its Handler: a Processor fed by Kafka, with
// a dead-letter topic.
//
// Processing is inline, in the partition's claim goroutine (or, for small
// batches merged across partitions, in the session's merger while the claim
// waits): record, apply and mark processed in one transaction, then mark the
// offset. Offsets are only
// marked after that transaction committed (sarama's auto-commit then commits
// marked offsets every second and on shutdown), so a crash anywhere before
// the mark re-delivers the message and the inbox absorbs the duplicate.
type Runner struct {
	cfg   Config
	pool  *pgxpool.Pool
	proc  *Processor
	m     *metrics
	ready atomic.Bool
}

// NewRunner validates cfg and registers the inbox metrics. Run starts it.
func NewRunner(pool *pgxpool.Pool, cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer, cfg.MetricPrefix, handlerTypes(cfg.Handlers))
	if err != nil {
		return nil, fmt.Errorf("inbox: registering metrics: %w", err)
	}
	// Run sets the dead-letter producer once it has one.
	return &Runner{cfg: cfg, pool: pool, m: m, proc: newProcessor(pool, cfg, m, nil)}, nil
}

// Counts returns a snapshot of the Runner's counters.
func (r *Runner) Counts() Counts { return r.m.counts() }

// Ready reports whether the Runner has joined its consumer group.
func (r *Runner) Ready() bool { return r.ready.Load() }

// Run consumes until ctx ends, then leaves the group (committing the marked
// offsets). With the inbox on it also applies parked events whose gap filled
// and prunes processed rows older than Retention.
func (r *Runner) Run(ctx context.Context) (err error) {
	consumerCfg, producerCfg := r.saramaConfigs()
	producer, err := sarama.NewSyncProducer(r.cfg.Brokers, producerCfg)
	if err != nil {
		return fmt.Errorf("inbox: starting the dead-letter producer: %w", err)
	}
	defer func() { err = errors.Join(err, producer.Close()) }()
	r.proc.eng.dlq = (&deadLetterProducer{producer: producer, topic: r.cfg.DeadLetterTopic, group: r.cfg.Group}).send

	group, err := sarama.NewConsumerGroup(r.cfg.Brokers, r.cfg.Group, consumerCfg)
	if err != nil {
		return fmt.Errorf("inbox: joining consumer group %s: %w", r.cfg.Group, err)
	}
	defer func() { err = errors.Join(err, group.Close()) }()

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.consume(ctx, group) })
	if !r.cfg.Unsafe.Disabled {
		g.Go(func() error { return r.every(ctx, r.cfg.SweepInterval, "sweeping parked events", r.proc.Sweep) })
		if r.cfg.Retention > 0 {
			g.Go(func() error { return r.every(ctx, r.cfg.RetentionInterval, "pruning the inbox", r.prune) })
		}
	}
	return g.Wait()
}

func (r *Runner) saramaConfigs() (consumer, producer *sarama.Config) {
	base := r.cfg.Sarama
	if base == nil {
		base = sarama.NewConfig()
		base.Version = sarama.V3_0_0_0
	}
	c := *base
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = true
	c.Consumer.Return.Errors = false
	c.ChannelBufferSize = max(c.ChannelBufferSize, r.cfg.BatchSize)
	if r.cfg.ProducerSarama != nil {
		return &c, r.cfg.ProducerSarama
	}
	p := *base
	p.Producer.RequiredAcks = sarama.WaitForAll
	p.Producer.Return.Successes = true
	p.Producer.Return.Errors = true
	return &c, &p
}

func (r *Runner) consume(ctx context.Context, group sarama.ConsumerGroup) error {
	h := &claimHandler{r: r}
	for {
		err := group.Consume(ctx, []string{r.cfg.Topic}, h)
		if ctx.Err() != nil || errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return nil
		}
		if err != nil {
			r.cfg.Logger.WarnContext(ctx, "consumer group session ended", "group", r.cfg.Group, "error", err)
			if err := sleep(ctx, time.Second); err != nil {
				return nil
			}
		}
	}
}

func (r *Runner) every(ctx context.Context, d time.Duration, what string, fn func(context.Context) error) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, what, "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (r *Runner) prune(ctx context.Context) error {
	n, err := Prune(ctx, r.pool, r.cfg)
	r.m.pruned.Add(float64(n))
	return err
}

// claimHandler is the sarama.ConsumerGroupHandler.
type claimHandler struct {
	r     *Runner
	merge *merger // the session's; nil when BatchSize is 1
}

func (h *claimHandler) Setup(sess sarama.ConsumerGroupSession) error {
	if h.r.cfg.BatchSize > 1 {
		h.merge = startMerger(sess.Context(), h.r)
	}
	h.r.ready.Store(true)
	return nil
}

func (h *claimHandler) Cleanup(sarama.ConsumerGroupSession) error {
	if h.merge != nil {
		h.merge.stop()
		h.merge = nil
	}
	return nil
}

// ConsumeClaim processes one partition's messages in order. It returns as
// soon as the session ends (a rebalance or shutdown): retries and backoff
// watch the session's context, so a slow or failing handler delays its own
// partition, never the group's rebalance, and a message whose processing was
// cut short keeps its offset unmarked and is delivered again.
//
// Messages already waiting in the claim's buffer are taken together, up to
// BatchSize, and processed in one transaction; a batch smaller than that is
// merged with other partitions' (merger).
func (h *claimHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	r := h.r
	ctx := sess.Context()
	lag := r.m.lag.WithLabelValues(claim.Topic(), strconv.FormatInt(int64(claim.Partition()), 10))
	batch := make([]*sarama.ConsumerMessage, 0, r.cfg.BatchSize)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return nil
		case km, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			batch = append(batch, km)
		}
	collect:
		for len(batch) < r.cfg.BatchSize {
			select {
			case km, ok := <-claim.Messages():
				if !ok {
					break collect
				}
				batch = append(batch, km)
			default:
				break collect
			}
		}
		if !h.process(sess, batch) {
			return nil // the session is ending; the offsets stay unmarked
		}
		last := batch[len(batch)-1]
		lag.Set(float64(max(claim.HighWaterMarkOffset()-last.Offset-1, 0)))
	}
}

// process runs a partition's batch through the inbox, merged with other
// partitions' when it is small and decodes, and marks the offsets of what
// went through. It reports false when the session ended first.
func (h *claimHandler) process(sess sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) bool {
	ctx := sess.Context()
	d := decode(batch)
	if h.merge != nil && len(batch) < h.r.cfg.BatchSize && d.ok {
		through, ok := h.merge.submit(ctx, batch, d.msgs)
		if !ok {
			return false
		}
		for _, km := range batch[:through] {
			sess.MarkMessage(km, "")
		}
		batch, d = batch[through:], d.from(through)
	}
	if len(batch) == 0 {
		return true
	}
	tctx, spans := h.r.traceProcess(ctx, batch)
	outcomes, err := h.r.handle(tctx, d)
	spans.end(outcomes, err)
	if err != nil {
		return false
	}
	for _, km := range batch {
		sess.MarkMessage(km, "")
	}
	return true
}

// decoded is a batch's messages as Decode read them.
type decoded struct {
	msgs []Message
	errs []error // errs[i] is msgs[i]'s
	ok   bool    // every message decoded, with an ID
}

func decode(kms []*sarama.ConsumerMessage) decoded {
	d := decoded{msgs: make([]Message, len(kms)), errs: make([]error, len(kms)), ok: true}
	for i, km := range kms {
		d.msgs[i], d.errs[i] = Decode(km)
		d.ok = d.ok && d.errs[i] == nil && d.msgs[i].ID != uuid.Nil
	}
	return d
}

// from is d without its first i messages (all of which decoded).
func (d decoded) from(i int) decoded {
	return decoded{msgs: d.msgs[i:], errs: d.errs[i:], ok: d.ok}
}

// handle processes consecutive decoded messages of one partition: together
// when they all decode, one by one otherwise.
func (r *Runner) handle(ctx context.Context, d decoded) ([]Outcome, error) {
	if d.ok {
		return r.proc.ProcessBatch(ctx, d.msgs)
	}
	outcomes := make([]Outcome, len(d.msgs))
	for i, msg := range d.msgs {
		var err error
		if d.errs[i] != nil {
			r.m.failed.WithLabelValues(ReasonUndecodable).Inc()
			outcomes[i], err = r.proc.eng.deadLetter(ctx, msg, ReasonUndecodable, d.errs[i], 1)
		} else {
			outcomes[i], err = r.proc.Process(ctx, msg)
		}
		if err != nil {
			return nil, err
		}
	}
	return outcomes, nil
}
