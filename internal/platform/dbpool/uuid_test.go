package dbpool_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/paylab/paylab/internal/platform/dbpool"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// A uuid.UUID travels to PostgreSQL and back unchanged through the direct
// plans, alone, in arrays, as text on the server, and NULL is refused.
func TestUUIDRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	pool, err := dbpool.New(ctx, testenv.NewDatabase(t, "orders"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	a, b := uuid.Must(uuid.NewV7()), uuid.New()
	var (
		back  uuid.UUID
		text  string
		many  []uuid.UUID
		count int
	)
	if err := pool.QueryRow(ctx, "SELECT $1::uuid, $1::uuid::text, $2::uuid[], cardinality($2::uuid[])", a, []uuid.UUID{a, b}).
		Scan(&back, &text, &many, &count); err != nil {
		t.Fatal(err)
	}
	if back != a || text != a.String() || count != 2 || len(many) != 2 || many[0] != a || many[1] != b {
		t.Fatalf("sent %s and [%s %s], got %s (%s) and %v", a, a, b, back, text, many)
	}
	if err := pool.QueryRow(ctx, "SELECT NULL::uuid").Scan(&back); err == nil {
		t.Fatal("scanned NULL into a uuid.UUID")
	}
}

// The direct plans are the ones chosen: encoding a uuid.UUID allocates
// nothing beyond the buffer (the driver.Valuer plan formats, fails and
// parses).
func TestUUIDEncodePlanIsDirect(t *testing.T) {
	m := pgtype.NewMap()
	dbpool.RegisterUUID(m)
	u := uuid.New()
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		out, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u, buf)
		if err != nil || len(out) != 16 {
			t.Fatalf("%d bytes, %v", len(out), err)
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations per encode, want at most 1", allocs)
	}
}
