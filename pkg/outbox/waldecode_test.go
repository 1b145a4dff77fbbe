package outbox

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

// rawInsert is an Insert message (after its type byte) into relation rel
// with an empty tuple.
func rawInsert(rel uint32) []byte {
	return append(binary.BigEndian.AppendUint32(nil, rel), 'N', 0, 0)
}

// An insert into a table the stream described as another table (another
// name, or the same name in another schema) is not an event; an insert
// into a relation the stream never described is an error, not a skip: it
// could be an outbox insert.
func TestWALDecoderSkipsOnlyDescribedOtherTables(t *testing.T) {
	d := newWALDecoder(walTable{"public", "outbox"})
	others := []*pglogrepl.RelationMessage{
		{RelationID: 7, Namespace: "public", RelationName: "orders"},
		{RelationID: 9, Namespace: "archive", RelationName: "outbox"},
	}
	for _, rel := range others {
		if err := d.relation(rel); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := d.insert(rawInsert(rel.RelationID)); ok || err != nil {
			t.Errorf("insert into %s.%s: ok %v, err %v; want ignored", rel.Namespace, rel.RelationName, ok, err)
		}
	}
	if _, _, err := d.insert(rawInsert(8)); err == nil {
		t.Error("an insert into an undescribed relation was skipped, want an error")
	}
}

// An outbox relation the decoder cannot read is refused with the reason: a
// column missing or of another type. An insert whose tuple does not match
// the relation described is an error, never a guess.
func TestWALDecoderRefusesAnUnexpectedSchema(t *testing.T) {
	columns := func() []*pglogrepl.RelationMessageColumn {
		var cs []*pglogrepl.RelationMessageColumn
		for _, c := range walColumns {
			cs = append(cs, &pglogrepl.RelationMessageColumn{Name: c.name, DataType: c.oid})
		}
		return cs
	}
	for _, tc := range []struct {
		name, want string
		edit       func([]*pglogrepl.RelationMessageColumn) []*pglogrepl.RelationMessageColumn
	}{
		{"missing column", "has no column headers", func(cs []*pglogrepl.RelationMessageColumn) []*pglogrepl.RelationMessageColumn {
			return cs[:colHeaders]
		}},
		{"another type", "payload has type oid 25", func(cs []*pglogrepl.RelationMessageColumn) []*pglogrepl.RelationMessageColumn {
			cs[colPayload].DataType = 25
			return cs
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := tc.edit(columns())
			d := newWALDecoder(walTable{"public", "outbox"})
			err := d.relation(&pglogrepl.RelationMessage{RelationID: 1, Namespace: "public", RelationName: "outbox", ColumnNum: uint16(len(cs)), Columns: cs})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	d := newWALDecoder(walTable{"public", "outbox"})
	cs := columns()
	if err := d.relation(&pglogrepl.RelationMessage{RelationID: 1, Namespace: "public", RelationName: "outbox", ColumnNum: uint16(len(cs)), Columns: cs}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.insert(rawInsert(1)); err == nil || !strings.Contains(err.Error(), "0 columns, where the relation has 12") {
		t.Errorf("an insert of another column count: err %v", err)
	}
}
