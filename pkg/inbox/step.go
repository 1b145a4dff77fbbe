package inbox

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/inbox/internal/inboxdb"
)

// step is the inbox's work for consecutive deliveries of one partition
// inside tx, with a fixed number of statements whatever their count:
//
//  1. record them all as processed (RecordProcessed); an id seen before —
//     or earlier in msgs — is a duplicate and goes no further;
//  2. lock the sequences of their aggregates, in sorted order
//     (LockSequences), and sort the events out in order: the next of its
//     aggregate is applied, an already applied position is a duplicate (the
//     producer re-issued it), a later one is parked (Park);
//  3. apply the events to apply, in order (the BatchHandler, or each
//     message's Handler), then advance their aggregates' sequences
//     (AdvanceSequences).
//
// It returns each delivery's outcome and the aggregates whose next event is
// parked and can be applied once tx committed (drain). With the inbox off it
// only runs the handlers.
func (e *engine) step(ctx context.Context, tx pgx.Tx, msgs []Message) ([]Outcome, []string, error) {
	if e.cfg.Unsafe.Disabled {
		outcomes := make([]Outcome, len(msgs))
		for i, msg := range msgs {
			if _, ok := e.cfg.Handlers[msg.Type]; !ok {
				return nil, nil, unknownType(msg)
			}
			outcomes[i] = Processed
		}
		return outcomes, nil, e.applyAll(ctx, tx, msgs)
	}
	q := e.queries(tx)
	fresh, applied, err := recordAndLock(ctx, q, msgs)
	if err != nil {
		return nil, nil, err
	}
	r, err := e.sortOut(msgs, fresh, applied)
	if err != nil {
		return nil, nil, err
	}
	if err := e.applyAll(ctx, tx, r.apply); err != nil {
		return nil, nil, err
	}
	if len(r.parked) > 0 {
		if err := q.Park(ctx, r.parked); err != nil {
			return nil, nil, fmt.Errorf("parking %d events: %w", len(r.parked), err)
		}
	}
	if len(r.advanced) == 0 {
		return r.outcomes, nil, nil
	}
	adv := inboxdb.AdvanceSequencesParams{}
	next := inboxdb.ParkedNextParams{}
	for a, seq := range r.advanced {
		adv.AggregateIds, adv.AppliedSequences = append(adv.AggregateIds, a), append(adv.AppliedSequences, seq)
		next.AggregateIds, next.Sequences = append(next.AggregateIds, a), append(next.Sequences, seq+1)
	}
	if err := q.AdvanceSequences(ctx, adv); err != nil {
		return nil, nil, fmt.Errorf("advancing the sequences of %d aggregates: %w", len(adv.AggregateIds), err)
	}
	ready, err := q.ParkedNext(ctx, next)
	if err != nil {
		return nil, nil, fmt.Errorf("looking for parked events: %w", err)
	}
	return r.outcomes, ready, nil
}

// recordAndLock records msgs and locks the sequences of the aggregates of
// those recorded for the first time. It returns the ids recorded now
// (fresh) and the locked aggregates' applied sequences.
func recordAndLock(ctx context.Context, q *inboxdb.Queries, msgs []Message) (map[uuid.UUID]bool, map[string]int64, error) {
	inserted, err := q.RecordProcessed(ctx, recordBatchParams(msgs))
	if err != nil {
		return nil, nil, fmt.Errorf("recording %d events: %w", len(msgs), err)
	}
	fresh := make(map[uuid.UUID]bool, len(inserted))
	for _, id := range inserted {
		fresh[id] = true
	}
	var aggregates []string
	for _, msg := range msgs {
		if fresh[msg.ID] && msg.Sequence > 0 {
			aggregates = append(aggregates, msg.Subject)
		}
	}
	applied := map[string]int64{}
	if len(aggregates) == 0 {
		return fresh, applied, nil
	}
	slices.Sort(aggregates)
	aggregates = slices.Compact(aggregates)
	seqs, err := q.LockSequences(ctx, aggregates)
	if err != nil {
		return nil, nil, fmt.Errorf("locking the sequences of %d aggregates: %w", len(aggregates), err)
	}
	for _, s := range seqs {
		applied[s.AggregateID] = s.AppliedSequence
	}
	return fresh, applied, nil
}

// sorted is what sortOut decided for a run of deliveries.
type sorted struct {
	outcomes []Outcome
	apply    []Message        // to apply, in order
	parked   []uuid.UUID      // recorded as processed, to park
	advanced map[string]int64 // aggregates whose applied sequence moved on, to where
}

// sortOut decides each delivery's outcome, in order, as if they came one at
// a time: fresh holds the ids recorded now, applied the aggregates'
// applied sequences before the run.
func (e *engine) sortOut(msgs []Message, fresh map[uuid.UUID]bool, applied map[string]int64) (sorted, error) {
	r := sorted{outcomes: make([]Outcome, len(msgs)), advanced: map[string]int64{}}
	for i, msg := range msgs {
		if !fresh[msg.ID] {
			r.outcomes[i] = Duplicate
			continue
		}
		delete(fresh, msg.ID) // a second copy further on is a duplicate
		if _, ok := e.cfg.Handlers[msg.Type]; !ok {
			return r, unknownType(msg)
		}
		switch last := applied[msg.Subject]; {
		case msg.Sequence == 0:
			r.outcomes[i], r.apply = Processed, append(r.apply, msg)
		case msg.Sequence <= last:
			// A new event id for a position already applied: the producer
			// re-issued it. Recorded as processed, not applied again.
			r.outcomes[i] = Duplicate
		case msg.Sequence > last+1:
			r.outcomes[i], r.parked = Parked, append(r.parked, msg.ID)
		default:
			r.outcomes[i], r.apply = Processed, append(r.apply, msg)
			applied[msg.Subject], r.advanced[msg.Subject] = msg.Sequence, msg.Sequence
		}
	}
	return r, nil
}

func unknownType(msg Message) error {
	return &handlerError{ReasonUnknownType, fmt.Errorf("%w %q", ErrUnknownType, msg.Type)}
}

// applyAll runs the handlers of msgs, in order, inside tx: the BatchHandler
// with all of them when there is one, otherwise each message's Handler.
func (e *engine) applyAll(ctx context.Context, tx pgx.Tx, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if e.cfg.BatchHandler != nil {
		return e.runHandler(ctx, tx, msgs, func(hctx context.Context) error { return e.cfg.BatchHandler(hctx, tx, msgs) })
	}
	for _, msg := range msgs {
		h := e.cfg.Handlers[msg.Type]
		mctx := MessageContext(ctx, msg)
		if err := e.runHandler(mctx, tx, []Message{msg}, func(hctx context.Context) error { return h(hctx, tx, msg) }); err != nil {
			return err
		}
	}
	return nil
}

// runHandler runs fn, a handler call for msgs in tx, with HandlerTimeout and
// classifies its error; its duration is observed once per message, shared
// out evenly.
func (e *engine) runHandler(ctx context.Context, tx pgx.Tx, msgs []Message, fn func(context.Context) error) error {
	hctx, cancel := context.WithTimeout(ctx, e.cfg.HandlerTimeout)
	defer cancel()
	start := time.Now()
	if err := fn(hctx); err != nil {
		what := fmt.Sprintf("%s %s", msgs[0].Type, msgs[0].ID)
		if len(msgs) > 1 {
			what = fmt.Sprintf("a batch of %d events", len(msgs))
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if transient(err, connLost(tx)) {
			return fmt.Errorf("handling %s: %w", what, err)
		}
		reason := ReasonHandlerFailed
		if IsPermanent(err) {
			reason = ReasonRejected
		}
		return &handlerError{reason, fmt.Errorf("handling %s: %w", what, err)}
	}
	each := time.Since(start).Seconds() / float64(len(msgs))
	for _, msg := range msgs {
		e.m.latency.WithLabelValues(msg.Type).Observe(each)
	}
	return nil
}

func recordBatchParams(msgs []Message) inboxdb.RecordProcessedParams {
	n := len(msgs)
	p := inboxdb.RecordProcessedParams{
		EventIds: make([]uuid.UUID, n), EventTypes: make([]string, n), Sources: make([]string, n),
		AggregateIds: make([]string, n), Sequences: make([]int64, n), EventTimes: make([]time.Time, n),
		Payloads: make([]json.RawMessage, n), Headers: make([]json.RawMessage, n), Topics: make([]string, n),
		KafkaPartitions: make([]int32, n), KafkaOffsets: make([]int64, n),
	}
	for i, msg := range msgs {
		r := recordParams(msg)
		p.EventIds[i], p.EventTypes[i], p.Sources[i], p.AggregateIds[i] = r.EventID, r.EventType, r.Source, r.AggregateID
		p.Sequences[i], p.Payloads[i], p.Headers[i], p.Topics[i] = r.Sequence, r.Payload, r.Headers, r.Topic
		p.KafkaPartitions[i], p.KafkaOffsets[i] = r.KafkaPartition, r.KafkaOffset
		if r.EventTime != nil {
			p.EventTimes[i] = *r.EventTime
		}
	}
	return p
}
