package outbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
	"github.com/paylab/paylab/pkg/outbox/migrations"
)

// This file and migrations/migrations.go are the same as pkg/inbox's, names
// aside, on purpose: each package is a Go module of its own, adopted alone,
// so neither imports the other, and a third module shared by both for these
// hundred lines would be one more to version and release in step with them
// and one more in every adopter's module graph. A change to one is made to
// both.

// Migration is one version of the outbox's schema, rendered for a table: the
// SQL to apply it (Up) and to revert it (Down). Versions start at 1 and have
// no gaps; apply them in order.
type Migration = migrations.Migration

// Migrations returns the outbox's schema migrations (embedded in the package)
// rendered for table ("" means DefaultTable), in version order, for the
// caller's own migration tool: write each to a file of that tool or register
// it as a code migration. Migrate applies them for those without a tool.
func Migrations(table string) ([]Migration, error) {
	if table == "" {
		table = DefaultTable
	}
	return migrations.Migrations(table)
}

func validateTable(table string) error { return migrations.ValidateTable(table) }

// Beginner starts a transaction: *pgxpool.Pool, *pgx.Conn and pgx.Tx (a
// savepoint) all do.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Migrate brings the outbox table of cfg (Config.Table) up to the package's
// latest schema version, for those who have no migration tool of their own:
// in one transaction, serialised with concurrent callers by an advisory
// lock, it applies the migrations newer than the version recorded in the
// table <table>_schema (created on first use). It is idempotent. A database
// whose schema is managed by another tool (with Migrations) must not also
// use Migrate: each would apply the migrations the other has.
func Migrate(ctx context.Context, db Beginner, cfg Config) error {
	table := cfg.Table
	if table == "" {
		table = DefaultTable
	}
	ms, err := Migrations(table)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		return applyMigrations(ctx, tx, table+"_schema", ms)
	})
}

// applyMigrations applies migrations newer than the version recorded in
// the table versions, inside tx.
func applyMigrations(ctx context.Context, tx pgx.Tx, versions string, ms []Migration) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", versions); err != nil {
		return fmt.Errorf("outbox: locking %s: %w", versions, err)
	}
	ident := pgx.Identifier{versions}.Sanitize()
	if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+ident+
		" (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return fmt.Errorf("outbox: creating %s: %w", versions, err)
	}
	var current int
	if err := tx.QueryRow(ctx, "SELECT COALESCE(max(version), 0) FROM "+ident).Scan(&current); err != nil {
		return fmt.Errorf("outbox: reading the schema version: %w", err)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		// No arguments: the simple protocol, which runs several statements.
		if _, err := tx.Exec(ctx, m.Up); err != nil {
			return fmt.Errorf("outbox: applying migration %d (%s): %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+ident+" (version) VALUES ($1)", m.Version); err != nil {
			return fmt.Errorf("outbox: recording migration %d: %w", m.Version, err)
		}
	}
	return nil
}

// templated runs the generated queries against the configured table: each
// statement is rendered once, on first use, and reused from then on.
type templated struct {
	db    outboxdb.DBTX
	table string
	sql   *sync.Map // generated SQL → rendered SQL
}

func withTable(db outboxdb.DBTX, table string, cache *sync.Map) outboxdb.DBTX {
	return templated{db: db, table: table, sql: cache}
}

func (t templated) render(sql string) string {
	if s, ok := t.sql.Load(sql); ok {
		return s.(string)
	}
	s := migrations.Render(sql, t.table)
	t.sql.Store(sql, s)
	return s
}

func (t templated) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.db.Exec(ctx, t.render(sql), args...)
}

func (t templated) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.db.Query(ctx, t.render(sql), args...)
}

func (t templated) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.db.QueryRow(ctx, t.render(sql), args...)
}
