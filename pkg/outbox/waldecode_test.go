package outbox

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

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
		if _, ok, err := d.insert(&pglogrepl.InsertMessage{RelationID: rel.RelationID, Tuple: &pglogrepl.TupleData{}}); ok || err != nil {
			t.Errorf("insert into %s.%s: ok %v, err %v; want ignored", rel.Namespace, rel.RelationName, ok, err)
		}
	}
	if _, _, err := d.insert(&pglogrepl.InsertMessage{RelationID: 8, Tuple: &pglogrepl.TupleData{}}); err == nil {
		t.Error("an insert into an undescribed relation was skipped, want an error")
	}
}
