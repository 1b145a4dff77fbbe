package orderapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderdb"
)

// effect makes one state change with q (bound to the transaction) and
// returns its result and the events that announce it.
type effect func(ctx context.Context, q *orderdb.Queries) (result any, events []outbox.Event, err error)

// rollbackTimeout bounds the rollback, which runs even when ctx is cancelled.
const rollbackTimeout = 5 * time.Second

// execute runs fn in one transaction together with the idempotency key and,
// depending on the mode, the outbox rows or the direct publish:
//
//	outbox:              claim key, effect, outbox rows, store key, [before_commit], commit,
//	                     [after_commit_before_publish]
//	naive:               claim key, effect, store key, [before_commit], commit,
//	                     [after_commit_before_publish], publish
//	naive-publish-first: claim key, effect, store key, publish,
//	                     [after_publish_before_commit], [before_commit], commit
//
// The whole runs in a span ("orders tx <op>"); the events carry its context.
func (s *Service) execute(ctx context.Context, op Op, opts Options, fn effect) (result any, stored *Response, replayed bool, err error) {
	ctx, span := s.startTx(ctx, op)
	var events []outbox.Event
	defer func() {
		err = translate(err)
		endTx(span, len(events), replayed, err)
	}()
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, nil, false, fmt.Errorf("beginning transaction: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if rerr := tx.Rollback(rctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			err = errors.Join(err, fmt.Errorf("rolling back: %w", rerr))
		}
	}()
	q := orderdb.New(tx)

	if idem := opts.Idempotency; idem != nil {
		prior, err := claimKey(ctx, q, idem)
		if err != nil {
			return nil, nil, false, err
		}
		if prior != nil {
			return nil, prior, true, nil
		}
	}

	result, events, err = fn(ctx, q)
	if err != nil {
		return nil, nil, false, translate(err)
	}
	tc := traceContext(ctx)
	for i := range events {
		s.completeEvent(&events[i], tc)
	}
	orderSpanAttributes(ctx, events)
	if s.mode == ModeOutbox {
		if err := s.outbox.Enqueue(ctx, tx, events...); err != nil {
			return nil, nil, false, err
		}
	}
	if idem := opts.Idempotency; idem != nil {
		if stored, err = storeKey(ctx, q, idem, result); err != nil {
			return nil, nil, false, err
		}
	}
	if s.mode == ModeNaivePublishFirst && len(events) > 0 {
		if err := s.publish(ctx, events); err != nil {
			return nil, nil, false, err
		}
		if err := s.hooks.at(ctx, StepAfterPublishBeforeCommit, op); err != nil {
			return nil, nil, false, err
		}
	}
	if err := s.hooks.at(ctx, StepBeforeCommit, op); err != nil {
		return nil, nil, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, false, fmt.Errorf("committing: %w", translate(err))
	}
	switch {
	case len(events) == 0:
	case s.mode == ModeNaive:
		s.publishAfterCommit(ctx, op, events)
	case s.mode == ModeOutbox:
		if s.notify != nil {
			s.notify.Notify()
		}
		// The same boundary in outbox mode: committed, and the relay will
		// publish. A failure here loses nothing; the client, like any client
		// whose response was lost, retries with its Idempotency-Key.
		if err := s.hooks.at(ctx, StepAfterCommitBeforePublish, op); err != nil {
			return nil, nil, false, err
		}
	}
	return result, stored, false, nil
}

// completeEvent fills in what every event of this service carries, among
// it the trace context of the transaction's span.
func (s *Service) completeEvent(e *outbox.Event, trace map[string]string) {
	if e.ID == uuid.Nil {
		// outbox.Enqueue would assign one too; naive mode needs it set here.
		e.ID = newID()
	}
	e.Topic = s.topic
	if len(trace) > 0 {
		e.Headers = make(map[string]string, len(trace))
		for k, v := range trace {
			e.Headers[k] = v
		}
	}
}

// publishAfterCommit is naive mode's second write. The change is committed
// and cannot be taken back, so a failure here is only logged and counted:
// the event is lost — the dual-write hole this mode demonstrates.
func (s *Service) publishAfterCommit(ctx context.Context, op Op, events []outbox.Event) {
	if err := s.hooks.at(ctx, StepAfterCommitBeforePublish, op); err != nil {
		s.naiveC.WithLabelValues("skipped").Add(float64(len(events)))
		s.log.ErrorContext(ctx, "naive mode: event lost after commit", "op", op, "events", len(events), "error", err)
		return
	}
	if err := s.publish(ctx, events); err != nil {
		s.log.ErrorContext(ctx, "naive mode: event lost after commit", "op", op, "events", len(events), "error", err)
	}
}

func (s *Service) publish(ctx context.Context, events []outbox.Event) error {
	msgs := make([]*sarama.ProducerMessage, len(events))
	for i := range events {
		msgs[i] = events[i].ProducerMessage(Source)
	}
	if err := s.pub.Publish(ctx, msgs); err != nil {
		s.naiveC.WithLabelValues("failed").Add(float64(len(events)))
		return fmt.Errorf("%w: %w", order.ErrPublish, err)
	}
	s.naiveC.WithLabelValues("published").Add(float64(len(events)))
	return nil
}
