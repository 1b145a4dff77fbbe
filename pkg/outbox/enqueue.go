package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// Tx is what Enqueue needs of the caller's transaction. pgx.Tx satisfies it
// (and so do *pgxpool.Pool and *pgx.Conn, but then there is no business
// change to be atomic with: pass the transaction).
type Tx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Writer enqueues events into one outbox table. It is safe for concurrent
// use; create one per table and share it.
type Writer struct {
	table   string
	channel string
	notify  bool
	sql     *sync.Map
}

// NewWriter returns a Writer for cfg's Table and Channel. The relays must be
// configured with the same names.
func NewWriter(cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("outbox: invalid config: %w", err)
	}
	cfg.withNames()
	return &Writer{table: cfg.Table, channel: cfg.Channel, notify: !cfg.NotifyAfterCommit, sql: new(sync.Map)}, nil
}

var defaultWriter = &Writer{table: DefaultTable, channel: DefaultTable, notify: true, sql: new(sync.Map)}

// Enqueue inserts events into the default outbox table ("outbox", channel
// "outbox") inside the caller's transaction tx; it is
// Writer.Enqueue for the zero Config.
func Enqueue(ctx context.Context, tx Tx, events ...Event) error {
	return defaultWriter.Enqueue(ctx, tx, events...)
}

// Enqueue inserts events into the outbox table inside the caller's
// transaction tx. The rows become visible — to relays and to everybody else —
// only when tx commits, and vanish with it if it rolls back: the business
// change and its events are written atomically. That is the whole point, so
// tx must be the same transaction that makes the business change.
//
// Events with a zero ID get a fresh UUIDv7; Enqueue sets the ID on the
// caller's slice elements. All events are inserted in one statement, which
// also queues one NOTIFY for the relays, unless the Writer's Config set
// NotifyAfterCommit: then call Notifier.Notify once tx has committed.
func (w *Writer) Enqueue(ctx context.Context, tx Tx, events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	now := time.Now().UTC()
	q := outboxdb.New(withTable(tx, w.table, w.sql))
	if len(events) == 1 { // a statement of scalars: no arrays to build and unnest
		e := &events[0]
		headers, err := e.encode(now)
		if err != nil {
			return err
		}
		if w.notify {
			err = q.InsertEvent(ctx, outboxdb.InsertEventParams{
				Channel: w.channel, Notify: true, EventID: e.ID, AggregateType: e.AggregateType,
				AggregateID: e.AggregateID, EventType: e.Type, SchemaVersion: int32(e.SchemaVersion),
				Sequence: e.Sequence, Topic: e.Topic, Payload: e.Payload, Headers: headers,
				OccurredAt: e.OccurredAt,
			})
		} else {
			err = q.InsertEventQuiet(ctx, outboxdb.InsertEventQuietParams{
				EventID: e.ID, AggregateType: e.AggregateType,
				AggregateID: e.AggregateID, EventType: e.Type, SchemaVersion: int32(e.SchemaVersion),
				Sequence: e.Sequence, Topic: e.Topic, Payload: e.Payload, Headers: headers,
				OccurredAt: e.OccurredAt,
			})
		}
		if err != nil {
			return fmt.Errorf("outbox: inserting event %s into %s: %w", e.ID, w.table, err)
		}
		return nil
	}
	p := outboxdb.InsertEventsParams{
		Channel:        w.channel,
		Notify:         w.notify,
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
		headers, err := e.encode(now)
		if err != nil {
			return err
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
	if err := q.InsertEvents(ctx, p); err != nil {
		return fmt.Errorf("outbox: inserting %d event(s) into %s: %w", len(events), w.table, err)
	}
	return nil
}

// encode normalizes e for insertion at now and returns its headers as the
// JSON object the table stores.
func (e *Event) encode(now time.Time) ([]byte, error) {
	if err := e.normalize(now); err != nil {
		return nil, err
	}
	if len(e.Headers) == 0 {
		return []byte("{}"), nil
	}
	headers, err := json.Marshal(e.Headers)
	if err != nil {
		return nil, fmt.Errorf("outbox: encoding headers of %s: %w", e.ID, err)
	}
	return headers, nil
}
