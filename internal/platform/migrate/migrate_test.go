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

// Database.Replication grants the role REPLICATION (the orders relay's WAL
// mode needs it); without it Bootstrap leaves the attribute alone.
func TestBootstrapGrantsReplicationOnRequest(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	admin := testenv.AdminURL()
	name := fmt.Sprintf("t_repl_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer conn.Close(context.Background())
		testenv.DropDatabase(t, name)
		if _, err := conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("dropping role %s: %v", name, err)
		}
	})
	replication := func() bool {
		t.Helper()
		var r bool
		if err := conn.QueryRow(ctx, `SELECT rolreplication FROM pg_roles WHERE rolname = $1`, name).Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	db := migrate.Database{Name: name, Role: name, Password: name}
	if err := migrate.Bootstrap(ctx, admin, []migrate.Database{db}); err != nil {
		t.Fatal(err)
	}
	if replication() {
		t.Fatal("REPLICATION granted without Database.Replication")
	}
	db.Replication = true
	if err := migrate.Bootstrap(ctx, admin, []migrate.Database{db}); err != nil {
		t.Fatal(err)
	}
	if !replication() {
		t.Fatal("Database.Replication did not grant REPLICATION")
	}
	db.Replication = false
	if err := migrate.Bootstrap(ctx, admin, []migrate.Database{db}); err != nil {
		t.Fatal(err)
	}
	if !replication() {
		t.Error("Bootstrap took REPLICATION back")
	}
}
