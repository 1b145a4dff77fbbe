package migrate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/migrate"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// Fresh gives a migrated, empty database every time, even where one of the
// same name holds data and has a session open.
func TestFreshStartsFromScratch(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	admin := testenv.AdminURL()
	if err := migrate.Bootstrap(ctx, admin, []migrate.Database{{Name: "ledger", Role: "ledger", Password: "ledger"}}); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("t_fresh_%d", time.Now().UnixNano())
	t.Cleanup(func() { testenv.DropDatabase(t, name) })

	url, err := migrate.Fresh(ctx, admin, name, "ledger", "ledger", "ledger")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `INSERT INTO inbox_sequences (aggregate_id) VALUES ('a')`); err != nil {
		t.Fatalf("the migrated schema: %v", err)
	}

	// Again, while conn is still connected: dropped, recreated, migrated.
	if _, err := migrate.Fresh(ctx, admin, name, "ledger", "ledger", "ledger"); err != nil {
		t.Fatal(err)
	}
	again, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(context.Background())
	var n int
	if err := again.QueryRow(ctx, `SELECT count(*) FROM inbox_sequences`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d rows survived Fresh, want 0", n)
	}
}
