package orderapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/pgpipe"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderdb"
)

// effect makes one state change with q (bound to the transaction) and
// returns its result and the events that announce it.
type effect func(ctx context.Context, q *orderdb.Queries) (result any, events []outbox.Event, err error)

// rollbackTimeout bounds the rollback, which runs even when ctx is cancelled.
const rollbackTimeout = 5 * time.Second

// txResult is what execute returns: the effect's result, or the response
// stored under the request's Idempotency-Key when it replays one.
type txResult struct {
	value    any
	stored   *Response
	replayed bool
}

// execute runs fn in one transaction together with the idempotency key, and
// hands the events to the mode's strategy (strategy.go) in the transaction
// and after the commit:
//
//	claim key, effect, store key, strategy.inTx, [before_commit], commit, strategy.afterCommit
//
// The writes that return nothing (storing the key, the outbox row) reach the
// database with the commit, in one round trip.
//
// The whole runs in a span ("orders tx <op>"); the events carry its context.
func (s *Service) execute(ctx context.Context, op Op, opts Options, fn effect) (res txResult, err error) {
	ctx, span := s.startTx(ctx, op)
	var events []outbox.Event
	defer func() {
		err = translate(err)
		endTx(span, len(events), res.replayed, err)
	}()
	conn, err := s.acquire(ctx)
	if err != nil {
		return txResult{}, err
	}
	// Released after the commit too (a second Release is a no-op): what
	// follows the commit, naive mode's publish, holds no connection.
	defer conn.Release()
	// BEGIN travels with the first statement, and the writes at the end
	// with COMMIT (pgpipe.Tx): a payment with an Idempotency-Key makes three
	// round trips, BEGIN + the key's lock and lookup · the captured order ·
	// the key + the outbox row + COMMIT.
	tx := pgpipe.Begin(conn.Conn())
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if rerr := tx.Rollback(rctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			err = errors.Join(err, fmt.Errorf("rolling back: %w", rerr))
		}
	}()
	q := orderdb.New(tx)

	if idem := opts.Idempotency; idem != nil {
		prior, err := claimKey(ctx, tx, q, idem)
		if err != nil {
			return txResult{}, err
		}
		if prior != nil {
			return txResult{stored: prior, replayed: true}, nil
		}
	}

	value, events, err := fn(ctx, q)
	if err != nil {
		return txResult{}, translate(err)
	}
	res.value = value
	tc := traceContext(ctx)
	for i := range events {
		s.completeEvent(&events[i], tc)
	}
	orderSpanAttributes(ctx, events)
	if idem := opts.Idempotency; idem != nil {
		if res.stored, err = storeKey(ctx, q, idem, value); err != nil {
			return txResult{}, err
		}
	}
	if err := s.write.inTx(ctx, tx, op, events); err != nil {
		return txResult{}, err
	}
	if err := s.hooks.at(ctx, StepBeforeCommit, op); err != nil {
		return txResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return txResult{}, fmt.Errorf("committing: %w", translate(err))
	}
	conn.Release()
	if len(events) > 0 {
		if err := s.write.afterCommit(ctx, op, events); err != nil {
			return txResult{}, err
		}
	}
	return res, nil
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

// publish sends events straight to Kafka: the naive modes' second write.
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
