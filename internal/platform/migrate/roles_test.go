package migrate_test

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/paylab/paylab/db/migrations"
	"github.com/paylab/paylab/internal/platform/migrate"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// rolesDatabases bootstraps the runtime roles (development passwords) and
// creates one migrated, granted database of each kind, dropped when the
// test ends; it returns each kind's database name.
func rolesDatabases(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	defaults := migrate.Defaults()
	if err := migrate.Bootstrap(ctx, testenv.AdminURL(), defaults); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	names := map[string]string{}
	for _, db := range defaults {
		name := fmt.Sprintf("t_roles_%s_%d", db.Name, time.Now().UnixNano())
		if err := migrate.EnsureDatabase(ctx, admin, name, db.Role, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { testenv.DropDatabase(t, name) })
		owner := roleURL(t, name, db.Role)
		if _, err := migrate.Up(ctx, owner, db.Name); err != nil {
			t.Fatal(err)
		}
		if err := migrate.Grant(ctx, owner, db.Name); err != nil {
			t.Fatal(err)
		}
		// Idempotent: a second init changes nothing.
		if err := migrate.Grant(ctx, owner, db.Name); err != nil {
			t.Fatal(err)
		}
		names[db.Name] = name
	}
	return names
}

// roleURL connects to database as role, whose password is its name.
func roleURL(t *testing.T, database, role string) string {
	t.Helper()
	u, err := migrate.URL(testenv.AdminURL(), database, role, role)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Each runtime role connects to its own database only, holds exactly the
// privileges the list gives it on exactly its tables, runs no DDL and
// reads no other table — where the database's owner, the role the
// services ran as before, does all of it — and has its timeouts.
func TestRuntimeRolesAreLeastPrivilege(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	dbs := rolesDatabases(t, ctx)

	// The control: the owner of a database runs DDL in it.
	owner, err := pgx.Connect(ctx, roleURL(t, dbs["orders"], "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(context.Background())
	if _, err := owner.Exec(ctx, "CREATE TABLE owner_may (id int); DROP TABLE owner_may"); err != nil {
		t.Fatalf("the owner cannot run DDL either: %v", err)
	}

	for _, kind := range migrations.Databases {
		for _, role := range migrate.RuntimeRoles(kind) {
			t.Run(role, func(t *testing.T) {
				conn, err := pgx.Connect(ctx, roleURL(t, dbs[kind], role))
				if err != nil {
					t.Fatalf("connecting to its own database: %v", err)
				}
				defer conn.Close(context.Background())
				tables := tablesOf(t, ctx, conn)
				mine := migrate.TablePrivileges(role)
				if len(mine) == 0 {
					t.Fatal("no tables")
				}

				// The privilege matrix: each table of the database, each privilege.
				for _, table := range tables {
					for _, priv := range []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"} {
						var has bool
						if err := conn.QueryRow(ctx, "SELECT has_table_privilege(current_user, $1, $2)", table, priv).Scan(&has); err != nil {
							t.Fatal(err)
						}
						want := slices.Contains(strings.Split(mine[table], ", "), priv)
						if has != want {
							t.Errorf("%s on %s: has %v, want %v", priv, table, has, want)
						}
					}
				}
				// What it must not do, statement by statement.
				refused := []string{
					"CREATE TABLE rogue (id int)",
					"CREATE TEMP TABLE rogue (id int)",
					"CREATE SCHEMA rogue",
					"CREATE FUNCTION rogue() RETURNS int LANGUAGE sql AS 'SELECT 1'",
					"SELECT * FROM goose_db_version",
					"INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, true)",
				}
				for table := range mine {
					if slices.Contains(tables, table) {
						q := pgx.Identifier{table}.Sanitize()
						refused = append(refused, "ALTER TABLE "+q+" ADD COLUMN rogue int", "DROP TABLE "+q,
							"TRUNCATE "+q, "CREATE INDEX ON "+q+" ((1))")
					}
				}
				for _, table := range tables {
					if _, ok := mine[table]; !ok && table != "goose_db_version" {
						refused = append(refused, "SELECT * FROM "+pgx.Identifier{table}.Sanitize())
					}
				}
				for _, stmt := range refused {
					if _, err := conn.Exec(ctx, stmt); pgCode(err) != "42501" {
						t.Errorf("%s: %v, want permission denied (42501)", stmt, err)
					}
				}
				var replication bool
				if err := conn.QueryRow(ctx, "SELECT rolreplication FROM pg_roles WHERE rolname = current_user").Scan(&replication); err != nil {
					t.Fatal(err)
				}
				if replication && role != migrate.OrdersRelay {
					t.Error("REPLICATION")
				}
				// The timeouts, from the role.
				stmt, idle := migrate.Timeouts(role)
				for setting, want := range map[string]time.Duration{"statement_timeout": stmt, "idle_in_transaction_session_timeout": idle} {
					var ms int64
					if err := conn.QueryRow(ctx, "SELECT setting::bigint FROM pg_settings WHERE name = $1", setting).Scan(&ms); err != nil {
						t.Fatal(err)
					}
					if want <= 0 || time.Duration(ms)*time.Millisecond != want {
						t.Errorf("%s = %dms, want %v", setting, ms, want)
					}
				}
				// Every other service's database is closed to it.
				for _, other := range migrations.Databases {
					if other == kind {
						continue
					}
					c, err := pgx.Connect(ctx, roleURL(t, dbs[other], role))
					if err == nil {
						c.Close(context.Background())
					}
					if pgCode(err) != "42501" {
						t.Errorf("connecting to the %s database: %v, want permission denied (42501)", other, err)
					}
				}
			})
		}
	}
}

// A statement that runs past the role's statement_timeout fails at once
// instead of holding its connection: the orders API's, the shortest.
func TestRuntimeRoleStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	dbs := rolesDatabases(t, ctx)
	conn, err := pgx.Connect(ctx, roleURL(t, dbs["orders"], migrate.OrdersAPI))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	limit, _ := migrate.Timeouts(migrate.OrdersAPI)
	start := time.Now()
	_, err = conn.Exec(ctx, fmt.Sprintf("SELECT pg_sleep(%f)", (limit+10*time.Second).Seconds()))
	if pgCode(err) != "57014" || time.Since(start) > limit+5*time.Second {
		t.Errorf("a statement of %v: %v after %v, want query_canceled (57014) after %v", limit+10*time.Second, err, time.Since(start), limit)
	}
}

// Every table the migrations create is some runtime role's or the goose
// history: a migration's new table needs its line in roles.go.
func TestEveryTableIsGranted(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	for _, kind := range migrations.Databases {
		conn, err := pgx.Connect(ctx, testenv.NewDatabase(t, kind))
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range tablesOf(t, ctx, conn) {
			granted := table == "goose_db_version"
			for _, role := range migrate.RuntimeRoles(kind) {
				_, ok := migrate.TablePrivileges(role)[table]
				granted = granted || ok
			}
			if !granted {
				t.Errorf("%s database: no runtime role uses table %s (internal/platform/migrate/roles.go)", kind, table)
			}
		}
		conn.Close(context.Background())
	}
}

// WAL mode gives the relay role REPLICATION and creates the publication,
// which the relay role could not; leaving it takes REPLICATION back and
// drops the slot — with its streaming session — and the publication.
func TestSetRelayMode(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	admin := testenv.AdminURL()
	suffix := fmt.Sprint(time.Now().UnixNano())
	relay, slot, publication := "t_relay_"+suffix, "t_slot_"+suffix, "t_pub_"+suffix
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if err := migrate.EnsureRole(ctx, conn, relay, relay); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{relay}.Sanitize()); err != nil {
			t.Errorf("dropping role %s: %v", relay, err)
		}
	})
	dbURL := testenv.NewDatabase(t, "orders")
	parsed, err := neturl.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	database := strings.TrimPrefix(parsed.Path, "/")
	if _, err := conn.Exec(ctx, fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s",
		pgx.Identifier{database}.Sanitize(), pgx.Identifier{relay}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The slot, if the test failed before poll mode dropped it.
		_, _ = conn.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
	})
	wal := migrate.WAL{Slot: slot, Publication: publication, Role: relay}
	state := func() (replication, slotExists, pubExists bool) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT (SELECT rolreplication FROM pg_roles WHERE rolname = $1),
			EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $2)`, relay, slot).Scan(&replication, &slotExists); err != nil {
			t.Fatal(err)
		}
		owner, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer owner.Close(context.Background())
		if err := owner.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", publication).Scan(&pubExists); err != nil {
			t.Fatal(err)
		}
		return replication, slotExists, pubExists
	}
	relayURL, err := migrate.URL(dbURL, database, relay, relay)
	if err != nil {
		t.Fatal(err)
	}
	createSlot := func() error {
		c, err := pgx.Connect(ctx, relayURL)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		_, err = c.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot)
		return err
	}

	// The standby guard's reading of pg_stat_replication needs pg_read_all_stats.
	readsStats := func() bool {
		c, err := pgx.Connect(ctx, relayURL)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		var ok bool
		if err := c.QueryRow(ctx, "SELECT pg_has_role('pg_read_all_stats', 'USAGE')").Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}

	if err := createSlot(); pgCode(err) != "42501" {
		t.Fatalf("before WAL mode the relay role created a slot: %v, want permission denied", err)
	}
	if err := migrate.SetRelayMode(ctx, admin, dbURL, migrate.RelayWAL, wal); err != nil {
		t.Fatal(err)
	}
	if r, _, p := state(); !r || !p {
		t.Fatalf("WAL mode: REPLICATION %v, publication %v; want both", r, p)
	}
	if err := createSlot(); err != nil {
		t.Fatalf("in WAL mode the relay role creates its slot: %v", err)
	}
	if !readsStats() {
		t.Fatal("in WAL mode the relay role cannot see the standbys' positions (pg_read_all_stats)")
	}
	// A session streaming the slot, as a WAL relay would.
	stream, err := pgconn.Connect(ctx, relayURL+"&replication=database")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close(context.Background())
	stream.Frontend().Send(&pgproto3.Query{String: fmt.Sprintf("START_REPLICATION SLOT %s LOGICAL 0/0 (proto_version '1', publication_names '%s')", slot, publication)})
	if err := stream.Frontend().Flush(); err != nil {
		t.Fatal(err)
	}
	if msg, err := stream.ReceiveMessage(ctx); err != nil {
		t.Fatal(err)
	} else if _, ok := msg.(*pgproto3.CopyBothResponse); !ok {
		t.Fatalf("START_REPLICATION: %T %+v, want the stream", msg, msg)
	}
	if err := migrate.SetRelayMode(ctx, admin, dbURL, migrate.RelayWAL, wal); err != nil {
		t.Fatalf("WAL mode again: %v", err)
	}

	if err := migrate.SetRelayMode(ctx, admin, dbURL, migrate.RelayPoll, wal); err != nil {
		t.Fatal(err)
	}
	if r, s, p := state(); r || s || p {
		t.Errorf("poll mode: REPLICATION %v, slot %v, publication %v; want none", r, s, p)
	}
	if err := createSlot(); pgCode(err) != "42501" {
		t.Errorf("after leaving WAL mode the relay role created a slot: %v, want permission denied", err)
	}
	if readsStats() {
		t.Error("after leaving WAL mode the relay role still has pg_read_all_stats")
	}
	if err := migrate.SetRelayMode(ctx, admin, dbURL, "stream", wal); err == nil {
		t.Error("relay mode stream accepted")
	}
}

func tablesOf(t *testing.T, ctx context.Context, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return tables
}
