package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/inbox/internal/inboxdb"
)

// deadLetterer sends a poison message to the dead-letter topic.
type deadLetterer interface {
	send(ctx context.Context, msg Message, reason string, cause error) error
}

// engine is the database side of the inbox: record, dedupe, order, apply,
// fail. It knows nothing of consumer groups.
type engine struct {
	pool *pgxpool.Pool
	cfg  Config
	m    *metrics
	log  *slog.Logger
	dlq  deadLetterer // nil in Redrive: failures are recorded, not published
}

// deliver processes one decoded delivery: handler failures are retried with
// backoff up to MaxAttempts, then dead-lettered. Failures of the inbox's own
// database work are retried until ctx ends. The only error returned is ctx's.
func (e *engine) deliver(ctx context.Context, msg Message) (Outcome, error) {
	backoff := e.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		var (
			outcome Outcome
			more    bool
		)
		err := withTx(ctx, e.pool, func(tx pgx.Tx) (err error) {
			outcome, more, err = e.step(ctx, tx, msg)
			return err
		})
		if err == nil {
			e.finish(ctx, msg, outcome, more)
			return outcome, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		var herr *handlerError
		if errors.As(err, &herr) {
			e.m.failed.WithLabelValues(herr.reason).Inc()
			if herr.reason != ReasonHandlerFailed || attempt >= e.cfg.MaxAttempts {
				return e.deadLetter(ctx, msg, herr.reason, herr.err, attempt)
			}
		}
		e.log.WarnContext(ctx, "processing event failed; retrying", "event_id", msg.ID, "type", msg.Type,
			"attempt", attempt, "backoff", backoff, "error", err)
		if err := sleep(ctx, backoff); err != nil {
			return "", err
		}
		backoff = min(2*backoff, e.cfg.MaxRetryBackoff)
	}
}

// deliverBatch processes several decoded deliveries in ONE transaction, which
// saves a commit per message. If anything in it fails, the transaction rolls
// back and the messages are delivered one by one (deliver), so a poison
// message costs its batch one wasted attempt and nothing else.
func (e *engine) deliverBatch(ctx context.Context, msgs []Message) ([]Outcome, error) {
	outcomes := make([]Outcome, len(msgs))
	more := make([]bool, len(msgs))
	err := withTx(ctx, e.pool, func(tx pgx.Tx) error {
		for i, msg := range msgs {
			var err error
			if outcomes[i], more[i], err = e.step(ctx, tx, msg); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for i, msg := range msgs {
			e.finish(ctx, msg, outcomes[i], more[i])
		}
		return outcomes, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	e.log.DebugContext(ctx, "batch failed; delivering its messages one by one", "size", len(msgs), "error", err)
	for i, msg := range msgs {
		if outcomes[i], err = e.deliver(ctx, msg); err != nil {
			return nil, err
		}
	}
	return outcomes, nil
}

// finish counts a committed delivery and applies the parked events it
// unblocked.
func (e *engine) finish(ctx context.Context, msg Message, outcome Outcome, more bool) {
	e.count(msg, outcome)
	if more {
		if err := e.drain(ctx, msg.Subject); err != nil {
			e.log.WarnContext(ctx, "applying parked events", "aggregate_id", msg.Subject, "error", err)
		}
	}
}

// step is one delivery inside tx. With the inbox on: record the event (a
// conflict means a duplicate), then apply it if it is next in its aggregate's
// sequence, or leave it parked; more reports that the event after it is
// parked and can be applied now. With the inbox off: run the handler.
func (e *engine) step(ctx context.Context, tx pgx.Tx, msg Message) (outcome Outcome, more bool, err error) {
	ctx = messageContext(ctx, msg)
	h, ok := e.cfg.Handlers[msg.Type]
	if e.cfg.Disabled {
		if !ok {
			return "", false, &handlerError{ReasonUnknownType, fmt.Errorf("%w %q", ErrUnknownType, msg.Type)}
		}
		return Processed, false, e.runHandler(ctx, tx, h, msg)
	}
	q := inboxdb.New(tx)
	n, err := q.Record(ctx, recordParams(msg))
	if err != nil {
		return "", false, fmt.Errorf("recording event %s: %w", msg.ID, err)
	}
	if n == 0 {
		return Duplicate, false, nil
	}
	if !ok {
		return "", false, &handlerError{ReasonUnknownType, fmt.Errorf("%w %q", ErrUnknownType, msg.Type)}
	}
	if msg.Sequence == 0 {
		return Processed, false, e.apply(ctx, q, tx, h, msg)
	}
	if err := q.EnsureSequence(ctx, msg.Subject); err != nil {
		return "", false, fmt.Errorf("creating sequence of %s: %w", msg.Subject, err)
	}
	applied, err := q.LockSequence(ctx, msg.Subject)
	if err != nil {
		return "", false, fmt.Errorf("locking sequence of %s: %w", msg.Subject, err)
	}
	switch {
	case msg.Sequence <= applied:
		// A new event id for a position already applied: the producer
		// re-issued it. Recorded as processed, not applied again.
		return Duplicate, false, q.MarkProcessed(ctx, msg.ID)
	case msg.Sequence > applied+1:
		return Parked, false, nil
	}
	if err := e.apply(ctx, q, tx, h, msg); err != nil {
		return "", false, err
	}
	more, err = q.HasParked(ctx, inboxdb.HasParkedParams{AggregateID: msg.Subject, Sequence: msg.Sequence + 1})
	if err != nil {
		return "", false, fmt.Errorf("looking for parked events of %s: %w", msg.Subject, err)
	}
	return Processed, more, nil
}

// apply runs the handler and marks the event processed (advancing its
// aggregate's sequence) inside tx.
func (e *engine) apply(ctx context.Context, q *inboxdb.Queries, tx pgx.Tx, h Handler, msg Message) error {
	if err := e.runHandler(ctx, tx, h, msg); err != nil {
		return err
	}
	if err := q.MarkProcessed(ctx, msg.ID); err != nil {
		return fmt.Errorf("marking event %s processed: %w", msg.ID, err)
	}
	if msg.Sequence > 0 {
		if err := q.AdvanceSequence(ctx, inboxdb.AdvanceSequenceParams{AggregateID: msg.Subject, AppliedSequence: msg.Sequence}); err != nil {
			return fmt.Errorf("advancing sequence of %s: %w", msg.Subject, err)
		}
	}
	return nil
}

func (e *engine) runHandler(ctx context.Context, tx pgx.Tx, h Handler, msg Message) error {
	hctx, cancel := context.WithTimeout(ctx, e.cfg.HandlerTimeout)
	defer cancel()
	start := time.Now()
	if err := h(hctx, tx, msg); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if transient(err) {
			return fmt.Errorf("handling %s %s: %w", msg.Type, msg.ID, err)
		}
		reason := ReasonHandlerFailed
		if IsPermanent(err) {
			reason = ReasonRejected
		}
		return &handlerError{reason, fmt.Errorf("handling %s %s: %w", msg.Type, msg.ID, err)}
	}
	e.m.latency.WithLabelValues(msg.Type).Observe(time.Since(start).Seconds())
	return nil
}

func (e *engine) count(msg Message, outcome Outcome) {
	switch outcome {
	case Processed:
		e.m.processed.WithLabelValues(msg.Type).Inc()
	case Duplicate:
		e.m.duplicates.WithLabelValues(msg.Type).Inc()
	case Parked:
		e.m.parked.Inc()
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
