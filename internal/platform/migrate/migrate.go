// Package migrate creates paylab's databases and their roles and applies the
// versioned migrations in db/migrations (goose, embedded in the binary).
//
// Each service's database is owned by its own role, the migration owner:
// it can log in and owns its database, nothing more (no superuser, no
// CREATEDB, no CREATEROLE), and runs the migrations (DDL). The processes
// connect as runtime roles (roles.go): one per process kind, DML on the
// tables it uses and nothing else, with statement and idle-in-transaction
// timeouts. Other roles cannot connect to the database.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/paylab/paylab/db/migrations"
)

// Database is one service database, the role that owns it and runs its
// migrations, and the runtime roles its processes connect as.
type Database struct {
	Name     string // database name, also the folder of its migrations
	Role     string // the owner
	Password string
	// Runtime are the runtime roles of the database's processes
	// (RuntimeRoles), with their passwords: Bootstrap creates them and
	// sets their timeouts; Grant gives them their tables once migrated.
	Runtime []Role
	// Replication grants the role the REPLICATION attribute, which the
	// orders relay's WAL mode needs (RELAY_MODE=wal) to stream a logical
	// replication slot. Bootstrap only grants it; it never takes it back.
	// paylab's relays connect as the runtime role OrdersRelay instead, which
	// SetRelayMode gives REPLICATION in WAL mode only.
	Replication bool
}

// Defaults returns the three paylab databases with development credentials:
// each role — the owner, named after the database, and the runtime roles —
// has its name as its password. Deployments set their own passwords (see
// cmd/paylab init).
func Defaults() []Database {
	dbs := make([]Database, 0, len(migrations.Databases))
	for _, name := range migrations.Databases {
		db := Database{Name: name, Role: name, Password: name}
		for _, r := range RuntimeRoles(name) {
			db.Runtime = append(db.Runtime, Role{Name: r, Password: r})
		}
		dbs = append(dbs, db)
	}
	return dbs
}

// bootstrapLock serialises concurrent bootstraps (CREATE DATABASE is not
// transactional, so "create if missing" needs a lock to be race-free).
const bootstrapLock = 0x7061796c6162 // "paylab"

// Bootstrap creates each role (owner and runtime roles) and database that
// does not exist yet, and sets the roles' passwords and the runtime roles'
// timeouts, granting the owner REPLICATION where Database.Replication asks
// for it. It connects with adminURL, a role allowed to create
// roles and databases. It is idempotent.
func Bootstrap(ctx context.Context, adminURL string, dbs []Database) (err error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting as admin: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", bootstrapLock); err != nil {
		return fmt.Errorf("taking the bootstrap lock: %w", err)
	}
	defer func() {
		_, unlockErr := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", bootstrapLock)
		err = errors.Join(err, unlockErr)
	}()

	for _, db := range dbs {
		if err := EnsureRole(ctx, conn, db.Role, db.Password); err != nil {
			return err
		}
		if db.Replication {
			if err := GrantReplication(ctx, conn, db.Role); err != nil {
				return err
			}
		}
		if err := EnsureDatabase(ctx, conn, db.Name, db.Role, ""); err != nil {
			return err
		}
		for _, r := range db.Runtime {
			if err := ensureRuntimeRole(ctx, conn, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// EnsureRole creates a login role with no other privileges, or resets the
// password of an existing one.
func EnsureRole(ctx context.Context, conn *pgx.Conn, role, password string) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role).Scan(&exists); err != nil {
		return fmt.Errorf("looking up role %s: %w", role, err)
	}
	verb := "CREATE"
	if exists {
		verb = "ALTER"
	}
	stmt := fmt.Sprintf("%s ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %s",
		verb, pgx.Identifier{role}.Sanitize(), quoteLiteral(password))
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s role %s: %w", strings.ToLower(verb)+"ing", role, err)
	}
	return nil
}

// GrantReplication gives role the REPLICATION attribute: it may then open
// replication connections and create and read replication slots, for the
// databases it may connect to.
func GrantReplication(ctx context.Context, conn *pgx.Conn, role string) error {
	if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+" REPLICATION"); err != nil {
		return fmt.Errorf("granting REPLICATION to %s: %w", role, err)
	}
	return nil
}

// EnsureDatabase creates database name owned by owner (from template, when
// not empty) unless it exists, and closes it to every role but its owner.
func EnsureDatabase(ctx context.Context, conn *pgx.Conn, name, owner, template string) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("looking up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	stmt := fmt.Sprintf("CREATE DATABASE %s OWNER %s", pgx.Identifier{name}.Sanitize(), pgx.Identifier{owner}.Sanitize())
	if template != "" {
		stmt += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("REVOKE ALL ON DATABASE %s FROM PUBLIC", pgx.Identifier{name}.Sanitize())); err != nil {
		return fmt.Errorf("closing database %s to other roles: %w", name, err)
	}
	return nil
}

// Fresh creates database name from scratch — dropping any database of that
// name first, with its sessions — owned by role, applies the migrations of
// kind (orders, ledger or notifications) and returns a URL that connects to it
// as role with password. The role must exist (EnsureRole). Benchmarks and
// scenario runs use it for databases of their own.
func Fresh(ctx context.Context, adminURL, name, kind, role, password string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connecting as admin: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := Drop(ctx, conn, name); err != nil {
		return "", err
	}
	if err := EnsureDatabase(ctx, conn, name, role, ""); err != nil {
		return "", err
	}
	dbURL, err := URL(adminURL, name, role, password)
	if err != nil {
		return "", err
	}
	if _, err := Up(ctx, dbURL, kind); err != nil {
		return "", err
	}
	return dbURL, nil
}

// Drop drops database name if it exists, disconnecting its sessions.
func Drop(ctx context.Context, conn *pgx.Conn, name string) error {
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	return nil
}

// Up applies the pending migrations of database to the database at dbURL
// and returns the resulting schema version. Concurrent callers are serialised
// by a PostgreSQL session lock.
func Up(ctx context.Context, dbURL, database string) (int64, error) {
	return run(ctx, dbURL, database, func(p *goose.Provider) error {
		_, err := p.Up(ctx)
		return err
	})
}

func run(ctx context.Context, dbURL, database string, step func(*goose.Provider) error) (version int64, err error) {
	fsys, err := migrations.FS(database)
	if err != nil {
		return 0, fmt.Errorf("migrations of %s: %w", database, err)
	}
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return 0, fmt.Errorf("parsing the %s database URL: %w", database, err)
	}
	db := stdlib.OpenDB(*cfg)
	defer func() { err = errors.Join(err, db.Close()) }()

	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithSessionLocker(locker))
	if err != nil {
		return 0, fmt.Errorf("loading migrations of %s: %w", database, err)
	}
	if err := step(p); err != nil {
		return 0, fmt.Errorf("migrating %s: %w", database, err)
	}
	return p.GetDBVersion(ctx)
}

// URL returns base (any PostgreSQL URL of the server) rewritten to connect to
// database as role with password.
func URL(base, database, role, password string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parsing database URL: %w", err)
	}
	u.User = url.UserPassword(role, password)
	u.Path = "/" + database
	return u.String(), nil
}

// quoteLiteral quotes s as an SQL string literal (for statements that take no
// parameters, such as CREATE ROLE … PASSWORD).
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
