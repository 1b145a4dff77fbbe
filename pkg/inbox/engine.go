package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/inbox/internal/inboxdb"
)

// engine is the database side of the inbox: record, dedupe, order, apply,
// fail. It knows nothing of consumer groups.
type engine struct {
	pool *pgxpool.Pool
	cfg  Config
	m    *metrics
	log  *slog.Logger
	dlq  DeadLetterFunc // nil in Redrive: failures are recorded, not published
	sql  *sync.Map      // the queries rendered for cfg.Table (schema.go)
}

func newEngine(pool *pgxpool.Pool, cfg Config, m *metrics) *engine {
	return &engine{pool: pool, cfg: cfg, m: m, log: cfg.Logger, sql: new(sync.Map)}
}

// queries runs the inbox's queries on db against cfg.Table.
func (e *engine) queries(db inboxdb.DBTX) *inboxdb.Queries {
	return inboxdb.New(withTable(db, e.cfg.Table, e.sql))
}

// deliver processes one decoded delivery: handler failures (and AfterCommit
// errors) are retried with backoff up to MaxAttempts, then dead-lettered.
// Failures of the inbox's own database work are retried until ctx ends. The
// only error returned is ctx's.
func (e *engine) deliver(ctx context.Context, msg Message) (Outcome, error) {
	backoff := e.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		var (
			outcomes []Outcome
			ready    []string
		)
		err := withTx(ctx, e.pool, func(tx pgx.Tx) (err error) {
			outcomes, ready, err = e.step(ctx, tx, []Message{msg})
			return err
		})
		if err == nil {
			e.finish(ctx, []Message{msg}, outcomes, ready)
			if err = e.afterCommit(ctx, msg, outcomes[0]); err == nil {
				return outcomes[0], nil
			}
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
		backoff = min(2*backoff, e.cfg.RetryMaxBackoff)
	}
}

// deliverBatch processes several decoded deliveries in ONE transaction with
// a fixed number of statements (step), which saves a commit and most round
// trips per message. If anything in it fails, the transaction rolls back —
// nothing of the batch is left applied — and the messages are delivered one
// by one (deliver), so a poison message costs its batch one wasted attempt
// and nothing else. If AfterCommit fails for a message of a committed batch,
// that message and those after it are delivered again one by one (the inbox
// finds them duplicates).
func (e *engine) deliverBatch(ctx context.Context, msgs []Message) ([]Outcome, error) {
	outcomes, err := e.commitBatch(ctx, msgs)
	from := 0 // the first message not yet through
	if err == nil {
		if from, err = e.afterCommits(ctx, msgs, outcomes); err == nil {
			return outcomes, nil
		}
	} else {
		outcomes = make([]Outcome, len(msgs))
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	e.log.DebugContext(ctx, "batch failed; delivering its messages one by one", "size", len(msgs)-from, "error", err)
	for i := from; i < len(msgs); i++ {
		if outcomes[i], err = e.deliver(ctx, msgs[i]); err != nil {
			return nil, err
		}
	}
	return outcomes, nil
}

// commitBatch runs step over msgs in one transaction and, once it
// committed, counts them and applies the parked events they unblocked. On
// an error nothing of msgs is applied.
func (e *engine) commitBatch(ctx context.Context, msgs []Message) ([]Outcome, error) {
	var (
		outcomes []Outcome
		ready    []string
	)
	err := withTx(ctx, e.pool, func(tx pgx.Tx) (err error) {
		outcomes, ready, err = e.step(ctx, tx, msgs)
		return err
	})
	if err != nil {
		return nil, err
	}
	e.finish(ctx, msgs, outcomes, ready)
	return outcomes, nil
}

// afterCommits calls AfterCommit for committed msgs in order, up to the
// first that fails; it returns how many went through.
func (e *engine) afterCommits(ctx context.Context, msgs []Message, outcomes []Outcome) (int, error) {
	for i, msg := range msgs {
		if err := e.afterCommit(ctx, msg, outcomes[i]); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

// afterCommit calls the AfterCommit hook of a delivery whose transaction
// committed. Its error fails the attempt as a handler's would.
func (e *engine) afterCommit(ctx context.Context, msg Message, outcome Outcome) error {
	if e.cfg.AfterCommit == nil {
		return nil
	}
	if err := e.cfg.AfterCommit(ctx, msg, outcome); err != nil {
		return &handlerError{ReasonHandlerFailed, fmt.Errorf("after committing %s %s: %w", msg.Type, msg.ID, err)}
	}
	return nil
}

// finish counts committed deliveries and applies the parked events they
// unblocked.
func (e *engine) finish(ctx context.Context, msgs []Message, outcomes []Outcome, ready []string) {
	for i, msg := range msgs {
		e.count(msg, outcomes[i])
	}
	for _, aggregate := range ready {
		if err := e.drain(ctx, aggregate); err != nil {
			e.log.WarnContext(ctx, "applying parked events", "aggregate_id", aggregate, "error", err)
		}
	}
}

// apply runs the handler of a parked or re-driven event and marks it
// processed (advancing its aggregate's sequence) inside tx.
func (e *engine) apply(ctx context.Context, q *inboxdb.Queries, tx pgx.Tx, msg Message) error {
	if err := e.applyAll(ctx, tx, []Message{msg}); err != nil {
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
