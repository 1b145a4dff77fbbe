package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DeadLetterFunc hands a message that cannot be applied to wherever poison
// messages go: reason is one of the Reason… constants, cause the last
// error. It runs inside the transaction that records the event failed in the
// inbox, so an error rolls that back and the dead-lettering is retried.
type DeadLetterFunc func(ctx context.Context, msg Message, reason string, cause error) error

// Processor runs the inbox — record the event id, skip a duplicate, hold an
// event until its aggregate's earlier ones are applied, apply it with its
// Handler in the same transaction — on messages from any source: a queue
// other than Kafka, an HTTP webhook, a consumer of your own. Runner is a
// Processor fed by a Kafka consumer group.
//
// The caller acknowledges a message to its source only once Process has
// returned an Outcome: the inbox then holds it (applied, skipped as a
// duplicate, parked behind a gap, or dead-lettered), and a redelivery is a
// duplicate.
type Processor struct {
	eng *engine
}

// NewProcessor validates cfg's Handlers and the fields that have defaults
// and registers the inbox metrics; the Kafka fields (Brokers, Topic, Group,
// DeadLetterTopic, Sarama, ProducerSarama) are not used. deadLetter
// receives the messages that cannot be applied; nil records them failed in
// the inbox only (Redrive applies them again).
func NewProcessor(pool *pgxpool.Pool, cfg Config, deadLetter DeadLetterFunc) (*Processor, error) {
	var errs []error
	if len(cfg.Handlers) == 0 {
		errs = append(errs, errors.New("inbox: no Handlers"))
	}
	if err := errors.Join(append(errs, cfg.validateOptional())...); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer, cfg.MetricPrefix, handlerTypes(cfg.Handlers))
	if err != nil {
		return nil, fmt.Errorf("inbox: registering metrics: %w", err)
	}
	if deadLetter == nil {
		deadLetter = func(context.Context, Message, string, error) error { return nil }
	}
	return newProcessor(pool, cfg, m, deadLetter), nil
}

func newProcessor(pool *pgxpool.Pool, cfg Config, m *metrics, deadLetter DeadLetterFunc) *Processor {
	eng := newEngine(pool, cfg, m)
	eng.dlq = deadLetter
	return &Processor{eng: eng}
}

// Process runs msg through the inbox and returns what happened to it.
// msg needs an ID (the dedupe key) and a Type (which selects the Handler);
// Subject and Sequence order it within its aggregate (Sequence 0:
// unordered). A message without an ID is dead-lettered as undecodable. A
// failing handler is retried with backoff, MaxAttempts times, then the
// message is dead-lettered; failures of the database are retried until ctx
// ends. The only error returned is ctx's.
func (p *Processor) Process(ctx context.Context, msg Message) (Outcome, error) {
	if msg.ID == uuid.Nil {
		p.eng.m.failed.WithLabelValues(ReasonUndecodable).Inc()
		return p.eng.deadLetter(ctx, msg, ReasonUndecodable, fmt.Errorf("%w: the message has no ID", ErrUndecodable), 1)
	}
	return p.eng.deliver(ctx, msg)
}

// ProcessBatch runs msgs, consecutive messages of one source in their
// order, through the inbox in one transaction (Config.BatchSize explains
// when batching is safe); if anything in it fails, they are processed one
// by one instead. It returns one Outcome per message.
func (p *Processor) ProcessBatch(ctx context.Context, msgs []Message) ([]Outcome, error) {
	if len(msgs) > 1 && !slices.ContainsFunc(msgs, func(m Message) bool { return m.ID == uuid.Nil }) {
		return p.eng.deliverBatch(ctx, msgs)
	}
	out := make([]Outcome, len(msgs))
	for i, msg := range msgs {
		o, err := p.Process(ctx, msg)
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	return out, nil
}

// Sweep applies the parked events whose gap has filled. They are normally
// applied right after the event that fills the gap; run Sweep every few
// seconds as a safety net (Runner does, every SweepInterval).
func (p *Processor) Sweep(ctx context.Context) error {
	if p.eng.cfg.Unsafe.Disabled {
		return nil
	}
	return p.eng.sweep(ctx)
}

// Counts returns a snapshot of the Processor's counters.
func (p *Processor) Counts() Counts { return p.eng.m.counts() }
