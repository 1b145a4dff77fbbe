package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// NotifyChannel is the PostgreSQL LISTEN/NOTIFY channel Enqueue signals on
// commit, so relays wake at once instead of waiting for their next poll.
const NotifyChannel = "paylab_outbox"

// Enqueue inserts events into the outbox table inside the caller's
// transaction tx. The rows become visible — to relays and to everybody else —
// only when tx commits, and vanish with it if it rolls back: the business
// change and its events are written atomically. That is the whole point, so
// tx must be the same transaction that makes the business change.
//
// Events with a zero ID get a fresh UUIDv7; Enqueue sets the ID on the
// caller's slice elements. All events are inserted in one statement, which
// also queues one NOTIFY for the relays.
func Enqueue(ctx context.Context, tx outboxdb.DBTX, events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	now := time.Now().UTC()
	p := outboxdb.InsertEventsParams{
		Channel:        NotifyChannel,
		EventIds:       make([]uuid.UUID, len(events)),
		AggregateTypes: make([]string, len(events)),
		AggregateIds:   make([]string, len(events)),
		EventTypes:     make([]string, len(events)),
		SchemaVersions: make([]int32, len(events)),
		Sequences:      make([]int64, len(events)),
		Topics:         make([]string, len(events)),
		Payloads:       make([]json.RawMessage, len(events)),
		Headers:        make([]json.RawMessage, len(events)),
		OccurredAts:    make([]time.Time, len(events)),
	}
	for i := range events {
		e := &events[i]
		if err := e.normalize(now); err != nil {
			return err
		}
		headers := []byte("{}")
		if len(e.Headers) > 0 {
			var err error
			if headers, err = json.Marshal(e.Headers); err != nil {
				return fmt.Errorf("outbox: encoding headers of %s: %w", e.ID, err)
			}
		}
		p.EventIds[i] = e.ID
		p.AggregateTypes[i] = e.AggregateType
		p.AggregateIds[i] = e.AggregateID
		p.EventTypes[i] = e.Type
		p.SchemaVersions[i] = int32(e.SchemaVersion)
		p.Sequences[i] = e.Sequence
		p.Topics[i] = e.Topic
		p.Payloads[i] = e.Payload
		p.Headers[i] = headers
		p.OccurredAts[i] = e.OccurredAt
	}
	if err := outboxdb.New(tx).InsertEvents(ctx, p); err != nil {
		return fmt.Errorf("outbox: inserting %d event(s): %w", len(events), err)
	}
	return nil
}
