package migrate_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for goose
	"github.com/pressly/goose/v3"

	"github.com/paylab/paylab/internal/platform/migrate"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// A database migrated before the outbox and inbox tables moved into their
// packages (its own files from db/migrations as they were then, the outbox's
// or inbox's as they were then from testdata/before-packages) keeps its
// goose history: migrating it applies only the migrations added since
// (orders: 00012, the unordered events, 00013, the WAL relay's readers,
// 00014, their slot generation, 00015, the API keys, 00016, the
// Idempotency-Keys per merchant, 00017, the outbox's leaner pending
// index, and 00018, its index of parked events; ledger: 00003, the API keys;
// notifications: none), and
// it ends with the same schema as a database migrated from scratch.
func TestExistingDatabasesKeepTheirHistory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		database string
		added    []int64
	}{
		{database: "orders", added: []int64{12, 13, 14, 15, 16, 17, 18}},
		{database: "ledger", added: []int64{3}},
		{database: "notifications"},
	} {
		t.Run(tc.database, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t)
			oldURL, newURL := emptyDatabase(t, ctx, tc.database), emptyDatabase(t, ctx, tc.database)

			db, err := sql.Open("pgx", oldURL)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			p, err := goose.NewProvider(goose.DialectPostgres, db, filesBeforePackages(t, tc.database))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Up(ctx); err != nil {
				t.Fatalf("migrating with the old files: %v", err)
			}
			before := appliedVersions(t, ctx, oldURL)
			if _, err := migrate.Up(ctx, oldURL, tc.database); err != nil {
				t.Fatalf("migrating the old database: %v", err)
			}
			if added := appliedVersions(t, ctx, oldURL)[len(before):]; !slices.Equal(added, tc.added) {
				t.Errorf("applied %v to the old database, want %v", added, tc.added)
			}
			if _, err := migrate.Up(ctx, newURL, tc.database); err != nil {
				t.Fatalf("migrating from scratch: %v", err)
			}
			old, fresh := schema(t, ctx, oldURL), schema(t, ctx, newURL)
			if !strings.Contains(fresh, "index CREATE UNIQUE INDEX") {
				t.Fatalf("no indexes in the schema:\n%s", fresh)
			}
			if old != fresh {
				t.Errorf("schemas differ:\nold database:\n%s\nfresh database:\n%s", old, fresh)
			}
		})
	}
}

// filesBeforePackages is database's migrations as they were before the
// packages owned their tables: its own of then (versions up to
// lastBeforePackages), unchanged since, and the outbox's (orders) or the
// inbox's (ledger, notifications) as they were then.
func filesBeforePackages(t *testing.T, database string) fs.FS {
	t.Helper()
	table := map[string]string{"orders": "outbox", "ledger": "inbox", "notifications": "inbox"}[database]
	out := fstest.MapFS{}
	for _, dir := range []string{"../../../db/migrations/" + database, "testdata/before-packages/" + table} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if v, err := goose.NumericComponent(e.Name()); err != nil || v > lastBeforePackages[database] {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = &fstest.MapFile{Data: b}
		}
	}
	return out
}

// lastBeforePackages is each database's last migration version before the
// packages owned their tables.
var lastBeforePackages = map[string]int64{"orders": 11, "ledger": 2, "notifications": 2}

// emptyDatabase creates an empty database owned by role database (dropped
// when the test ends) and returns its URL.
func emptyDatabase(t *testing.T, ctx context.Context, database string) string {
	t.Helper()
	if err := migrate.Bootstrap(ctx, testenv.AdminURL(), []migrate.Database{{Name: database, Role: database, Password: database}}); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	name := fmt.Sprintf("t_history_%s_%d", database, time.Now().UnixNano())
	if err := migrate.EnsureDatabase(ctx, admin, name, database, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DropDatabase(t, name) })
	url, err := migrate.URL(testenv.AdminURL(), name, database, database)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

func appliedVersions(t *testing.T, ctx context.Context, url string) []int64 {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT version_id FROM goose_db_version WHERE version_id > 0 ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return versions
}

// schema describes the public schema: columns, constraints, indexes and
// table options, one line each, sorted.
func schema(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `
		SELECT format('column %s.%s %s %s default %s', table_name, column_name, data_type, is_nullable,
		              coalesce(column_default, '-'))
		FROM information_schema.columns WHERE table_schema = 'public' AND table_name <> 'goose_db_version'
		UNION ALL
		SELECT format('constraint %s %s: %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
		FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND conrelid <> 'goose_db_version'::regclass
		UNION ALL
		SELECT format('index %s', indexdef) FROM pg_indexes
		WHERE schemaname = 'public' AND tablename <> 'goose_db_version'
		UNION ALL
		SELECT format('options %s %s', relname, reloptions) FROM pg_class
		WHERE relnamespace = 'public'::regnamespace AND reloptions IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
