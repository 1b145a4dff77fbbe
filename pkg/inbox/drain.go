package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/inbox/internal/inboxdb"
)

// drain applies an aggregate's parked events while the next one in sequence
// is parked. A parked event whose handler fails is retried up to MaxAttempts
// (attempts are counted in its inbox row, so they survive restarts), then
// dead-lettered; the aggregate's later events stay parked until an operator
// re-drives it (Redrive): they are never applied out of order.
func (e *engine) drain(ctx context.Context, aggregate string) error {
	backoff := e.cfg.RetryBackoff
	for {
		var row inboxdb.Inbox
		found := false
		err := withTx(ctx, e.pool, func(tx pgx.Tx) error {
			q := e.queries(tx)
			if err := q.EnsureSequence(ctx, aggregate); err != nil {
				return fmt.Errorf("creating sequence of %s: %w", aggregate, err)
			}
			applied, err := q.LockSequence(ctx, aggregate)
			if err != nil {
				return fmt.Errorf("locking sequence of %s: %w", aggregate, err)
			}
			row, err = q.Parked(ctx, inboxdb.ParkedParams{AggregateID: aggregate, Sequence: applied + 1})
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("reading parked event of %s: %w", aggregate, err)
			}
			found = true
			msg := messageFromRow(row)
			if _, ok := e.cfg.Handlers[msg.Type]; !ok {
				return unknownType(msg)
			}
			sctx, span := traceDrained(ctx, msg)
			err = e.apply(sctx, q, tx, msg)
			endDrained(span, err)
			return err
		})
		if err == nil {
			if !found {
				return nil
			}
			e.count(messageFromRow(row), Processed)
			backoff = e.cfg.RetryBackoff
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var herr *handlerError
		if !errors.As(err, &herr) {
			return err // the sweeper tries again later
		}
		e.m.failed.WithLabelValues(herr.reason).Inc()
		msg := messageFromRow(row)
		attempts := int(row.Attempts) + 1
		if herr.reason != ReasonHandlerFailed || attempts >= e.cfg.MaxAttempts || e.dlq == nil {
			if _, err := e.deadLetter(ctx, msg, herr.reason, herr.err, 1); err != nil {
				return err
			}
			return fmt.Errorf("event %s of %s failed: %w", msg.ID, aggregate, herr)
		}
		if err := e.queries(e.pool).RecordAttemptError(ctx, inboxdb.RecordAttemptErrorParams{
			EventID: msg.ID, LastError: ptr(herr.Error()),
		}); err != nil {
			return fmt.Errorf("recording attempt of %s: %w", msg.ID, err)
		}
		if err := sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, e.cfg.RetryMaxBackoff)
	}
}

// sweep drains every aggregate whose next event is parked: a safety net for a
// crash between applying an event and draining the ones it unblocked.
func (e *engine) sweep(ctx context.Context) error {
	aggregates, err := e.queries(e.pool).ReadyAggregates(ctx, 100)
	if err != nil {
		return fmt.Errorf("listing aggregates with parked events: %w", err)
	}
	for _, a := range aggregates {
		if err := e.drain(ctx, a); err != nil {
			e.log.WarnContext(ctx, "applying parked events", "aggregate_id", a, "error", err)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
