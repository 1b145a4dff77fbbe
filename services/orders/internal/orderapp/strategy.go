package orderapp

import (
	"context"

	"github.com/paylab/paylab/pkg/outbox"
)

// strategy is how a mode gets the events of a change out: what it does in
// the change's transaction, once the change and its idempotency key are
// written and before the commit, and what it does after the commit.
// execute is the same for every mode; only the strategy differs.
type strategy interface {
	inTx(ctx context.Context, tx outbox.Tx, op Op, events []outbox.Event) error
	// afterCommit runs only for a change that has events. An error is
	// returned to the client; the change is committed all the same.
	afterCommit(ctx context.Context, op Op, events []outbox.Event) error
}

// newStrategy returns the strategy of s's mode.
func (s *Service) newStrategy() strategy {
	switch s.mode {
	case ModeNaive:
		return naive{s}
	case ModeNaivePublishFirst:
		return publishFirst{s}
	default:
		return outboxWrite{s}
	}
}

// outboxWrite writes the events into the outbox table in the change's
// transaction: they commit or vanish with it, and a relay publishes them.
type outboxWrite struct{ s *Service }

func (w outboxWrite) inTx(ctx context.Context, tx outbox.Tx, _ Op, events []outbox.Event) error {
	return w.s.outbox.Enqueue(ctx, tx, events...)
}

// afterCommit wakes the relays. The fault point here loses nothing: the
// events are committed and the relay will publish them; the client, like
// any client whose response was lost, retries with its Idempotency-Key.
func (w outboxWrite) afterCommit(ctx context.Context, op Op, _ []outbox.Event) error {
	if w.s.notify != nil {
		w.s.notify.Notify()
	}
	return w.s.hooks.at(ctx, StepAfterCommitBeforePublish, op)
}

// naive commits the change, then publishes its events: a crash or a broker
// outage between the two loses them (the dual-write hole).
type naive struct{ s *Service }

func (naive) inTx(context.Context, outbox.Tx, Op, []outbox.Event) error { return nil }

// afterCommit publishes. The change cannot be taken back, so a failure is
// only logged and counted: the events are lost.
func (n naive) afterCommit(ctx context.Context, op Op, events []outbox.Event) error {
	if err := n.s.hooks.at(ctx, StepAfterCommitBeforePublish, op); err != nil {
		n.s.naiveC.WithLabelValues("skipped").Add(float64(len(events)))
		n.s.log.ErrorContext(ctx, "naive mode: event lost after commit", "op", op, "events", len(events), "error", err)
		return nil
	}
	if err := n.s.publish(ctx, events); err != nil {
		n.s.log.ErrorContext(ctx, "naive mode: event lost after commit", "op", op, "events", len(events), "error", err)
	}
	return nil
}

// publishFirst publishes the events inside the change's transaction, before
// the commit: a commit that then fails leaves phantom events announcing a
// change that never happened.
type publishFirst struct{ s *Service }

func (p publishFirst) inTx(ctx context.Context, _ outbox.Tx, op Op, events []outbox.Event) error {
	if len(events) == 0 {
		return nil
	}
	if err := p.s.publish(ctx, events); err != nil {
		return err
	}
	return p.s.hooks.at(ctx, StepAfterPublishBeforeCommit, op)
}

func (publishFirst) afterCommit(context.Context, Op, []outbox.Event) error { return nil }
