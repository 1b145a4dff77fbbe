package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The runtime roles: the logins paylab's processes connect as. Each may
// connect to its service's database and use the tables runtimeRoles lists,
// nothing more: no DDL (PostgreSQL 15 gives PUBLIC no CREATE on schema
// public, and none of them owns a table), no other service's database, no
// goose history. The database's owner (Database.Role) runs the migrations.
const (
	OrdersAPI        = "orders_api"        // the orders API (orders serve)
	OrdersRelay      = "orders_relay"      // the outbox relays (orders relay)
	LedgerApp        = "ledger_app"        // the ledger consumer and its read API
	NotificationsApp = "notifications_app" // the notifications consumer
)

// Privileges a runtime role may hold on a table.
const (
	dml        = "SELECT, INSERT, UPDATE, DELETE"
	appendOnly = "SELECT, INSERT"
)

// runtimeRole is one runtime role: its database, its tables and the limits
// that make a stuck database fail its statements fast instead of piling up
// sessions.
type runtimeRole struct {
	database string
	// tables maps each table the role uses to its privileges on it.
	tables map[string]string
	// statementTimeout bounds one statement; idleInTransaction a session
	// idle inside an open transaction (ALTER ROLE … SET, so every session
	// of the role has them; a session may still SET its own).
	statementTimeout, idleInTransaction time.Duration
	// replication: the role may get the REPLICATION attribute, in WAL mode
	// only (SetRelayMode).
	replication bool
}

// runtimeRoles is the one list of the runtime roles' table privileges.
//
// A migration that adds a table adds it here, to each role that uses it
// (the orders API's api_keys, say: the API looks keys up, paylab keys
// writes them as the owner); TestEveryTableIsGranted fails for a table no role names (but
// goose_db_version, the owner's). A table named here that the database does not
// have (yet) is skipped, so the grant may land before its migration.
var runtimeRoles = map[string]runtimeRole{
	OrdersAPI: {
		database: "orders",
		tables: map[string]string{
			"orders":           dml,
			"refunds":          dml,
			"idempotency_keys": dml,
			"api_keys":         "SELECT",   // looked up; paylab keys writes them as the owner
			"outbox":           appendOnly, // Enqueue, in the payment's transaction
		},
		statementTimeout:  5 * time.Second,
		idleInTransaction: 10 * time.Second,
	},
	OrdersRelay: {
		database: "orders",
		tables: map[string]string{
			"outbox":             "SELECT, UPDATE, DELETE", // claim, record, park, prune; never write an event
			"outbox_wal_readers": dml,
		},
		statementTimeout:  30 * time.Second,
		idleInTransaction: time.Minute,
		replication:       true,
	},
	LedgerApp: {
		database: "ledger",
		tables: map[string]string{
			"accounts":        "SELECT, INSERT",
			"balances":        "SELECT, INSERT, UPDATE",
			"ledger_orders":   "SELECT, INSERT, UPDATE",
			"journal_entries": appendOnly, // the journal is never rewritten
			"postings":        appendOnly,
			"api_keys":        "SELECT", // the read API's keys
			"inbox":           dml,
			"inbox_sequences": dml,
		},
		statementTimeout:  30 * time.Second,
		idleInTransaction: time.Minute,
	},
	NotificationsApp: {
		database: "notifications",
		tables: map[string]string{
			"notifications":   appendOnly,
			"inbox":           dml,
			"inbox_sequences": dml,
		},
		statementTimeout:  30 * time.Second,
		idleInTransaction: time.Minute,
	},
}

// RuntimeRoles returns the names of database's runtime roles, sorted.
func RuntimeRoles(database string) []string {
	var names []string
	for name, r := range runtimeRoles {
		if r.database == database {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TablePrivileges returns the privileges the runtime role named role has
// on each of its tables (as GRANT spells them: "SELECT, INSERT"); nil for
// a name that is not a runtime role.
func TablePrivileges(role string) map[string]string {
	r, ok := runtimeRoles[role]
	if !ok {
		return nil
	}
	out := make(map[string]string, len(r.tables))
	for t, p := range r.tables {
		out[t] = p
	}
	return out
}

// Timeouts returns the statement_timeout and
// idle_in_transaction_session_timeout of the runtime role named role.
func Timeouts(role string) (statement, idleInTransaction time.Duration) {
	r := runtimeRoles[role]
	return r.statementTimeout, r.idleInTransaction
}

// Role is a login: a name and its password.
type Role struct {
	Name     string
	Password string
}

// ensureRuntimeRole creates or updates the runtime role r: a login with no
// other attribute (REPLICATION is SetRelayMode's) and its timeouts.
func ensureRuntimeRole(ctx context.Context, conn *pgx.Conn, r Role) error {
	spec, ok := runtimeRoles[r.Name]
	if !ok {
		return fmt.Errorf("%s is not a runtime role", r.Name)
	}
	if err := EnsureRole(ctx, conn, r.Name, r.Password); err != nil {
		return err
	}
	role := pgx.Identifier{r.Name}.Sanitize()
	for _, stmt := range []string{
		fmt.Sprintf("ALTER ROLE %s SET statement_timeout = %d", role, spec.statementTimeout.Milliseconds()),
		fmt.Sprintf("ALTER ROLE %s SET idle_in_transaction_session_timeout = %d", role, spec.idleInTransaction.Milliseconds()),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("setting up runtime role %s: %w", r.Name, err)
		}
	}
	return nil
}

// Grant gives database's runtime roles CONNECT on the database at dbURL (a
// migrated database of kind database, connected as its owner or a
// superuser) and their privileges on its tables, and takes back any other privilege they
// hold on its tables and sequences: after Grant, each holds exactly what
// runtimeRoles lists. The roles must exist (Bootstrap creates them). It is
// idempotent and runs in one transaction.
func Grant(ctx context.Context, dbURL, database string) (err error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connecting to the %s database: %w", database, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback(context.WithoutCancel(ctx)))
		}
	}()
	var current string
	if err := tx.QueryRow(ctx, "SELECT current_database()").Scan(&current); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')`)
	if err != nil {
		return fmt.Errorf("listing the tables of %s: %w", database, err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("listing the tables of %s: %w", database, err)
	}
	for _, name := range RuntimeRoles(database) {
		role := pgx.Identifier{name}.Sanitize()
		stmts := []string{
			// PostgreSQL 15 no longer gives PUBLIC CREATE on schema public;
			// a database from an older server may still.
			"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
			fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", pgx.Identifier{current}.Sanitize(), role),
			"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM " + role,
			"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM " + role,
		}
		var inserts []string
		for table, privileges := range runtimeRoles[name].tables {
			if !slices.Contains(tables, table) {
				continue
			}
			stmts = append(stmts, fmt.Sprintf("GRANT %s ON TABLE %s TO %s", privileges, pgx.Identifier{table}.Sanitize(), role))
			if strings.Contains(privileges, "INSERT") {
				inserts = append(inserts, table)
			}
		}
		for _, stmt := range stmts {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("granting %s its tables in %s: %w", name, database, err)
			}
		}
		// The serial columns' sequences of the tables it inserts into
		// (identity columns need no grant).
		if _, err := tx.Exec(ctx, `DO $$
			DECLARE s regclass;
			BEGIN
				FOR s IN SELECT d.objid::regclass FROM pg_depend d
					JOIN pg_class t ON t.oid = d.refobjid AND t.relnamespace = 'public'::regnamespace
					JOIN pg_class q ON q.oid = d.objid AND q.relkind = 'S'
					WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'a' AND t.relname = ANY(`+quoteLiteral("{"+strings.Join(inserts, ",")+"}")+`::text[])
				LOOP
					EXECUTE format('GRANT USAGE ON SEQUENCE %s TO %I', s, `+quoteLiteral(name)+`);
				END LOOP;
			END $$`); err != nil {
			return fmt.Errorf("granting %s the sequences of its tables in %s: %w", name, database, err)
		}
	}
	return tx.Commit(ctx)
}

// Relay modes (the relays' RELAY_MODE).
const (
	RelayPoll = "poll"
	RelayWAL  = "wal"
)

// WAL names the WAL relay's replication slot and publication (the relays'
// RELAY_SLOT and RELAY_PUBLICATION; empty: their defaults) and the role the
// relays connect as (empty: OrdersRelay).
type WAL struct {
	Slot, Publication, Role string
}

func (w WAL) names() (slot, publication, role string) {
	slot, publication, role = w.Slot, w.Publication, w.Role
	if role == "" {
		role = OrdersRelay
	}
	if slot == "" {
		slot = "outbox_wal_relay"
	}
	if publication == "" {
		publication = "outbox_wal"
	}
	return slot, publication, role
}

// SetRelayMode prepares the orders database at ownerURL (connected as its
// owner) for the relays' mode; adminURL connects as a role that may alter
// roles (a superuser).
//
// wal: the relay role gets REPLICATION (the replication slot needs it) and
// pg_read_all_stats (the standby guard reads pg_stat_replication), and
// the owner creates the publication the WAL relay streams, which the relay
// role, owning no table, could not.
//
// poll: the relay role loses REPLICATION and pg_read_all_stats, and the
// WAL relay's slot and publication go, with any session still streaming the
// slot: the polling relays cannot drop them any more, and a slot nobody
// reads keeps the server's WAL from its position on. Stop the WAL relays first; one still
// running can no longer open a replication connection.
func SetRelayMode(ctx context.Context, adminURL, ownerURL, mode string, wal WAL) error {
	slot, publication, relay := wal.names()
	if mode != RelayPoll && mode != RelayWAL {
		return fmt.Errorf("relay mode %q is not %s or %s", mode, RelayPoll, RelayWAL)
	}
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting as admin: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	owner, err := pgx.Connect(ctx, ownerURL)
	if err != nil {
		return fmt.Errorf("connecting to the orders database: %w", err)
	}
	defer owner.Close(context.WithoutCancel(ctx))
	role := pgx.Identifier{relay}.Sanitize()
	pub := pgx.Identifier{publication}.Sanitize()

	if mode == RelayWAL {
		if err := GrantReplication(ctx, admin, relay); err != nil {
			return err
		}
		// The WAL relay's standby guard reads the synchronous standbys'
		// flush positions, which pg_stat_replication shows only to roles
		// with pg_read_all_stats (docs/wal-relay.md, "Standby guard").
		if _, err := admin.Exec(ctx, "GRANT pg_read_all_stats TO "+role); err != nil {
			return fmt.Errorf("granting pg_read_all_stats to %s: %w", relay, err)
		}
		var exists bool
		if err := owner.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", publication).Scan(&exists); err != nil {
			return fmt.Errorf("looking up publication %s: %w", publication, err)
		}
		if !exists {
			if _, err := owner.Exec(ctx, "CREATE PUBLICATION "+pub+" FOR TABLE outbox WITH (publish = 'insert')"); err != nil {
				return fmt.Errorf("creating publication %s: %w", publication, err)
			}
		}
		return nil
	}
	if _, err := admin.Exec(ctx, "ALTER ROLE "+role+" NOREPLICATION"); err != nil {
		return fmt.Errorf("revoking REPLICATION from %s: %w", relay, err)
	}
	if _, err := admin.Exec(ctx, "REVOKE pg_read_all_stats FROM "+role); err != nil {
		return fmt.Errorf("revoking pg_read_all_stats from %s: %w", relay, err)
	}
	// The slot, on the owner's connection (current_database()), dropped
	// by the superuser: a streaming session is ended first.
	var database string
	if err := owner.QueryRow(ctx, "SELECT current_database()").Scan(&database); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		_, err := admin.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
			WHERE slot_name = $1 AND database = $2 AND active_pid IS NOT NULL`, slot, database)
		if err == nil {
			_, err = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
				WHERE slot_name = $1 AND database = $2`, slot, database)
		}
		if err == nil {
			break
		}
		// A walsender ends a moment after it was told to.
		if attempt == 50 || ctx.Err() != nil {
			return fmt.Errorf("dropping replication slot %s: %w", slot, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := owner.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pub); err != nil {
		return fmt.Errorf("dropping publication %s: %w", publication, err)
	}
	return nil
}
