package outbox

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// walEvent is one outbox row decoded from the WAL (or read by the
// hand-over), on its way through the WAL relay.
type walEvent struct {
	id        int64
	xid       uint32 // the transaction that inserted it; 0 for a row read from the table
	createdAt time.Time
	event     Event
	err       error // set when the row cannot become an Event: it is parked
	parked    bool  // resolved by parking (permanent error, or its aggregate is parked)
	held      bool  // resolved by holding it aside for a retry (walheld.go); holdErr is its failure, nil behind another
	holdErr   error
	attempts  int // failed publish attempts, broker outages not counted
}

// The columns the relay reads, with the type each must have. pgoutput sends
// them in binary (the "binary" option), so the walsender spends no time
// formatting uuids and timestamps.
const (
	colID = iota
	colEventID
	colAggregateType
	colAggregateID
	colEventType
	colSchemaVersion
	colSequence
	colTopic
	colPayload
	colHeaders
	colOccurredAt
	colCreatedAt
	numWALColumns
)

var walColumns = [numWALColumns]struct {
	name string
	oid  uint32
}{
	colID:            {"id", 20}, // int8
	colEventID:       {"event_id", 2950},
	colAggregateType: {"aggregate_type", 25},
	colAggregateID:   {"aggregate_id", 25},
	colEventType:     {"event_type", 25},
	colSchemaVersion: {"schema_version", 23},
	colSequence:      {"sequence", 20},
	colTopic:         {"topic", 25},
	colPayload:       {"payload", 3802},
	colHeaders:       {"headers", 3802},
	colOccurredAt:    {"occurred_at", 1184},
	colCreatedAt:     {"created_at", 1184},
}

// fixedWidth are the binary sizes of the fixed-width columns.
var fixedWidth = [...]struct{ col, n int }{
	{colID, 8}, {colEventID, 16}, {colSchemaVersion, 4}, {colSequence, 8}, {colOccurredAt, 8}, {colCreatedAt, 8},
}

// walDecoder turns pgoutput Relation and Insert messages into walEvents.
// Inserts are decoded straight from the message's bytes (walinsert.go):
// the relay's CPU per event is mostly decoding and encoding, and a generic
// tuple decoder allocates a column and a copy per column.
type walDecoder struct {
	table walTable
	// relations maps each relation id the stream described to the layout
	// of its tuples; nil for another table.
	relations map[uint32]*walRelation
	scratch   []byte // reused to gather an event's text columns
}

// walRelation is the outbox table's tuple layout, from its Relation
// message: how many columns a tuple has, and which outbox column (or -1,
// for a column the relay does not read) each position holds.
type walRelation struct {
	columns []int8
}

func newWALDecoder(table walTable) *walDecoder {
	return &walDecoder{table: table, relations: map[uint32]*walRelation{}}
}

// relation records a table's column layout; pgoutput sends it before the
// first change of the table in a session, and again after it changed.
func (d *walDecoder) relation(m *pglogrepl.RelationMessage) error {
	if m.Namespace != d.table.schema || m.RelationName != d.table.name {
		d.relations[m.RelationID] = nil // not the outbox: its inserts are ignored
		return nil
	}
	if len(m.Columns) != int(m.ColumnNum) {
		return fmt.Errorf("outbox table %s.%s: the relation message lists %d columns of %d", m.Namespace, m.RelationName, len(m.Columns), m.ColumnNum)
	}
	var pos [numWALColumns]int
	for i := range pos {
		pos[i] = -1
	}
	rel := &walRelation{columns: make([]int8, len(m.Columns))}
	for i, c := range m.Columns {
		rel.columns[i] = -1
		for k, want := range walColumns {
			if c.Name != want.name {
				continue
			}
			if c.DataType != want.oid {
				return fmt.Errorf("outbox column %s has type oid %d, want %d", c.Name, c.DataType, want.oid)
			}
			if pos[k] >= 0 {
				return fmt.Errorf("outbox table %s.%s has two columns named %s", m.Namespace, m.RelationName, c.Name)
			}
			pos[k], rel.columns[i] = i, int8(k)
		}
	}
	for k, p := range pos {
		if p < 0 {
			return fmt.Errorf("outbox table %s.%s has no column %s", m.Namespace, m.RelationName, walColumns[k].name)
		}
	}
	d.relations[m.RelationID] = rel
	return nil
}

// jsonbText strips the version byte of jsonb's binary form, leaving the
// JSON text PostgreSQL renders (what pgx returns to the polling relay).
func jsonbText(b []byte) (json.RawMessage, error) {
	if len(b) == 0 || b[0] != 1 {
		return nil, fmt.Errorf("unknown jsonb binary format")
	}
	return json.RawMessage(b[1:]), nil
}

// pgEpoch is PostgreSQL's timestamp epoch.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// pgTime decodes a binary timestamptz: microseconds since 2000-01-01 UTC.
func pgTime(b []byte) time.Time {
	return pgEpoch.Add(time.Duration(int64(binary.BigEndian.Uint64(b))) * time.Microsecond)
}

// walEventFromHandover turns a row read from the table (by the hand-over or
// the sweep) into a walEvent.
func walEventFromHandover(x outboxdb.WALHandoverEventsRow) walEvent {
	w := walEvent{id: x.ID, createdAt: x.CreatedAt, event: Event{
		ID: x.EventID, AggregateType: x.AggregateType, AggregateID: x.AggregateID, Type: x.EventType,
		SchemaVersion: int(x.SchemaVersion), Sequence: x.Sequence, Topic: x.Topic, Payload: x.Payload,
		OccurredAt: x.OccurredAt,
	}}
	var err error
	if w.event.Headers, err = decodeHeaders(string(x.Headers)); err != nil {
		w.err = Permanent(fmt.Errorf("decoding the headers of event %s: %w", x.EventID, err))
	}
	return w
}

// lsnMax returns the larger position.
func lsnMax(a, b pglogrepl.LSN) pglogrepl.LSN {
	if a > b {
		return a
	}
	return b
}
