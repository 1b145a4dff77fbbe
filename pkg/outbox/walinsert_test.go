package outbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// pgoutputCapture is where TestWALDecoderReadsRealInserts keeps the
// messages it read from a slot (PAYLAB_UPDATE_PGOUTPUT=1 writes it again),
// the seeds of FuzzWALDecoderInsert: one hex message a line, a Relation
// message first.
const pgoutputCapture = "testdata/pgoutput_outbox.hex"

// The decoder against pgoutput's own bytes: events with every kind of
// field (ordered and not, headers plain, escaped, non-ASCII, none, a
// schema version, timestamps before 2000) are enqueued, streamed from a
// real slot in binary mode, and decoded as the relay decodes them; each
// must come back as it was enqueued, and agree with pglogrepl's generic
// decoding of the same bytes. A column added to the table (a new Relation
// message) is skipped; every truncation of a real insert is an error.
func TestWALDecoderReadsRealInserts(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, url := testenv.NewPool(t, func(ctx context.Context, pool *pgxpool.Pool) error {
		return Migrate(ctx, pool, Config{})
	})
	slot := "t_decode_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := pool.Exec(ctx, "CREATE PUBLICATION "+slot+" FOR TABLE outbox"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			if _, err := pool.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	events := []Event{
		{AggregateType: "order", AggregateID: "ord-1", Type: "OrderCaptured", Sequence: 1, Topic: "order-events",
			Payload: json.RawMessage(`{"amount": 100, "currency": "EUR"}`), Headers: map[string]string{"traceparent": tp}},
		{AggregateType: "order", AggregateID: "ord-1", Type: "OrderRefunded", Sequence: 2, SchemaVersion: 3, Topic: "order-events",
			Payload: json.RawMessage(`{"note": "quote \" and \\ and é"}`), Headers: map[string]string{"traceparent": tp, "tracestate": "k=v,x=y"}},
		{AggregateType: "cart", AggregateID: "Überweisung-ä", Type: "CartChecked", Topic: "cart-events",
			Payload: json.RawMessage(`[1, 2, 3]`)},
		{AggregateType: "order", AggregateID: "ord-2", Type: "OrderCaptured", Sequence: 1, Topic: "order-events",
			Payload: json.RawMessage(`{}`), Headers: map[string]string{"baggage": "a=\"b\"\n", "ключ": "значение"},
			OccurredAt: time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return Enqueue(ctx, tx, events[:2]...) }); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE outbox ADD COLUMN note text DEFAULT 'a column the relay does not read'"); err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return Enqueue(ctx, tx, events[2:]...) }); err != nil {
		t.Fatal(err)
	}
	var created []time.Time
	rows, err := pool.Query(ctx, "SELECT created_at FROM outbox ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if created, err = pgx.CollectRows(rows, pgx.RowTo[time.Time]); err != nil {
		t.Fatal(err)
	}

	msgs := streamMessages(t, ctx, url, slot, len(events))
	d := newWALDecoder(walTable{"public", "outbox"})
	got := 0
	for _, m := range msgs {
		switch m[0] {
		case 'R':
			parsed, err := pglogrepl.Parse(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.relation(parsed.(*pglogrepl.RelationMessage)); err != nil {
				t.Fatal(err)
			}
		case 'I':
			e, ok, err := d.insert(m[1:])
			if err != nil || !ok || e.err != nil {
				t.Fatalf("insert %d: ok %v, err %v, event err %v", got, ok, err, e.err)
			}
			checkDecoded(t, e, events[got], created[got])
			checkAgainstGeneric(t, d, m)
			for n := range len(m) - 1 {
				if _, _, err := d.insert(m[1 : 1+n]); err == nil {
					t.Errorf("insert %d cut to %d bytes of %d: no error", got, n, len(m)-1)
				}
			}
			got++
		}
	}
	if got != len(events) {
		t.Fatalf("decoded %d inserts, want %d", got, len(events))
	}
	if os.Getenv("PAYLAB_UPDATE_PGOUTPUT") != "" {
		var b strings.Builder
		for _, m := range msgs {
			if m[0] == 'R' || m[0] == 'I' {
				fmt.Fprintln(&b, hex.EncodeToString(m))
			}
		}
		if err := os.MkdirAll(filepath.Dir(pgoutputCapture), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pgoutputCapture, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// streamMessages reads the slot in binary mode, as the relay does, until
// it has n inserts, and returns every pgoutput message (copied).
func streamMessages(t *testing.T, ctx context.Context, url, slot string, n int) [][]byte {
	t.Helper()
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", slot), "binary 'true'"},
	}); err != nil {
		t.Fatal(err)
	}
	var msgs [][]byte
	for inserts := 0; inserts < n; {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			t.Fatal(err)
		}
		if len(xld.WALData) > 0 && xld.WALData[0] == 'I' {
			inserts++
		}
		msgs = append(msgs, bytes.Clone(xld.WALData))
	}
	return msgs
}

func checkDecoded(t *testing.T, e walEvent, want Event, created time.Time) {
	t.Helper()
	w := e.event
	if w.ID != want.ID || w.AggregateType != want.AggregateType || w.AggregateID != want.AggregateID ||
		w.Type != want.Type || w.SchemaVersion != want.SchemaVersion || w.Sequence != want.Sequence || w.Topic != want.Topic {
		t.Errorf("decoded %+v, want %+v", w, want)
	}
	if !w.OccurredAt.Equal(want.OccurredAt.Truncate(time.Microsecond)) || !e.createdAt.Equal(created) {
		t.Errorf("times %v, %v; want %v, %v", w.OccurredAt, e.createdAt, want.OccurredAt, created)
	}
	if !maps.Equal(w.Headers, want.Headers) {
		t.Errorf("headers %q, want %q", w.Headers, want.Headers)
	}
	var a, b any
	if err := json.Unmarshal(w.Payload, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want.Payload, &b); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("payload %s, want %s", w.Payload, want.Payload)
	}
}

// checkAgainstGeneric decodes m (an Insert message) with pglogrepl's
// generic tuple decoder and the relation d has, and compares the columns
// with what d decoded.
func checkAgainstGeneric(t *testing.T, d *walDecoder, m []byte) {
	t.Helper()
	e, ok, err := d.insert(m[1:])
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	ref, err := genericInsert(d, m)
	if err != nil {
		t.Fatal(err)
	}
	if !sameEvent(e, ref) {
		t.Errorf("decoded\n%+v\ngeneric decoding\n%+v", e, ref)
	}
}

// sameEvent compares two decodings of one row.
func sameEvent(a, b walEvent) bool {
	x, y := a.event, b.event
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	return a.id == b.id && a.createdAt.Equal(b.createdAt) && errText(a.err) == errText(b.err) &&
		x.ID == y.ID && x.AggregateType == y.AggregateType && x.AggregateID == y.AggregateID && x.Type == y.Type &&
		x.SchemaVersion == y.SchemaVersion && x.Sequence == y.Sequence && x.Topic == y.Topic &&
		bytes.Equal(x.Payload, y.Payload) && maps.Equal(x.Headers, y.Headers) && x.OccurredAt.Equal(y.OccurredAt)
}

// genericInsert decodes an Insert message with pglogrepl's generic decoder
// and encoding/json, the way the relay decoded it before: the reference of
// the specialised decoder.
func genericInsert(d *walDecoder, m []byte) (e walEvent, err error) {
	defer func() {
		if p := recover(); p != nil { // pglogrepl does not check lengths
			err = fmt.Errorf("pglogrepl: %v", p)
		}
	}()
	parsed, err := pglogrepl.Parse(m)
	if err != nil {
		return e, err
	}
	ins, ok := parsed.(*pglogrepl.InsertMessage)
	if !ok {
		return e, fmt.Errorf("%T", parsed)
	}
	rel := d.relations[ins.RelationID]
	if rel == nil || len(ins.Tuple.Columns) != len(rel.columns) {
		return e, fmt.Errorf("no such relation, or another column count")
	}
	var raw [numWALColumns][]byte
	for i, k := range rel.columns {
		if k >= 0 {
			if ins.Tuple.Columns[i].DataType != pglogrepl.TupleDataTypeBinary {
				return e, fmt.Errorf("column %d not binary", i)
			}
			raw[k] = ins.Tuple.Columns[i].Data
		}
	}
	for _, f := range fixedWidth {
		if len(raw[f.col]) != f.n {
			return e, fmt.Errorf("column %d of %d bytes", f.col, len(raw[f.col]))
		}
	}
	payload, err := jsonbText(raw[colPayload])
	if err != nil {
		return e, err
	}
	headers, err := jsonbText(raw[colHeaders])
	if err != nil {
		return e, err
	}
	e.id = int64(be64(raw[colID]))
	e.createdAt = pgTime(raw[colCreatedAt])
	e.event = Event{
		ID: uuid.UUID(raw[colEventID]), AggregateType: string(raw[colAggregateType]), AggregateID: string(raw[colAggregateID]),
		Type: string(raw[colEventType]), SchemaVersion: int(int32(be32(raw[colSchemaVersion]))), Sequence: int64(be64(raw[colSequence])),
		Topic: string(raw[colTopic]), Payload: payload, OccurredAt: pgTime(raw[colOccurredAt]),
	}
	if len(headers) > 0 && string(headers) != "{}" {
		if err := json.Unmarshal(headers, &e.event.Headers); err != nil {
			e.err = Permanent(fmt.Errorf("decoding the headers of event %s: %w", e.event.ID, err))
		}
	}
	return e, nil
}

func be64(b []byte) uint64 {
	var x uint64
	for _, c := range b {
		x = x<<8 | uint64(c)
	}
	return x
}

func be32(b []byte) uint32 { return uint32(be64(b)) }

// The specialised decoder on any bytes: it never panics, and whatever it
// decodes, pglogrepl's generic decoder with encoding/json decodes the same.
// Seeds: messages read from a real slot (pgoutputCapture).
func FuzzWALDecoderInsert(f *testing.F) {
	file, err := os.Open(pgoutputCapture)
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	var relation *pglogrepl.RelationMessage
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m, err := hex.DecodeString(sc.Text())
		if err != nil {
			f.Fatal(err)
		}
		switch m[0] {
		case 'R':
			if relation == nil {
				parsed, err := pglogrepl.Parse(m)
				if err != nil {
					f.Fatal(err)
				}
				relation = parsed.(*pglogrepl.RelationMessage)
			}
		case 'I':
			f.Add(m)
		}
	}
	if err := sc.Err(); err != nil || relation == nil {
		f.Fatalf("reading %s: %v, relation %v", pgoutputCapture, err, relation)
	}
	f.Fuzz(func(t *testing.T, m []byte) {
		if len(m) == 0 || m[0] != 'I' {
			return
		}
		d := newWALDecoder(walTable{"public", "outbox"})
		if err := d.relation(relation); err != nil {
			t.Fatal(err)
		}
		e, ok, err := d.insert(m[1:])
		if err != nil || !ok {
			return
		}
		ref, rerr := genericInsert(d, m)
		if rerr != nil {
			t.Fatalf("decoded %+v; the generic decoder: %v", e, rerr)
		}
		if !sameEvent(e, ref) {
			t.Errorf("decoded\n%+v\ngeneric decoding\n%+v", e, ref)
		}
	})
}
