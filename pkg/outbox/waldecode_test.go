package outbox

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

// An insert into a table the stream described as another table is not an
// event; an insert into a relation the stream never described is an error,
// not a skip: it could be an outbox insert.
func TestWALDecoderSkipsOnlyDescribedOtherTables(t *testing.T) {
	d := newWALDecoder("outbox")
	if err := d.relation(&pglogrepl.RelationMessage{RelationID: 7, RelationName: "orders"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := d.insert(&pglogrepl.InsertMessage{RelationID: 7, Tuple: &pglogrepl.TupleData{}}); ok || err != nil {
		t.Errorf("insert into another table: ok %v, err %v; want ignored", ok, err)
	}
	if _, _, err := d.insert(&pglogrepl.InsertMessage{RelationID: 8, Tuple: &pglogrepl.TupleData{}}); err == nil {
		t.Error("an insert into an undescribed relation was skipped, want an error")
	}
}
