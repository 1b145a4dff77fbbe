package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// SetupWAL creates what the WAL relay reads, idempotently: the publication
// of the outbox table's INSERTs (WALConfig.Publication), the logical
// replication slot that decodes it with pgoutput (WALConfig.Slot), and the
// slot's row in <table>_wal_readers (migrations 5 and 6), which holds the
// reader lease, the slot's generation and the hand-over.
//
// A slot streams only the transactions that commit after it was created.
// Events committed before — a backlog left by the polling relay, say — are
// not in its stream: whenever a slot is created, the highest pending id and
// the time are recorded under a new generation, and the reader publishes
// the events still pending within those bounds (the hand-over) before it
// streams a slot of a generation it has not handed over for. A transaction
// in flight while the slot was created may be both handed over and
// streamed: a duplicate, never a loss. A slot that is missing or
// invalidated (wal_status lost) while a reader holds the lease is left to
// that reader, which recreates it the same way.
//
// pool must connect as a role that may create publications on the table
// (its owner) and replication slots (the REPLICATION attribute, or a
// superuser). SetupWAL is safe to call from several relays at once and at
// every start.
func SetupWAL(ctx context.Context, pool *pgxpool.Pool, cfg WALConfig) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("outbox: invalid config: %w", err)
	}
	return setupWAL(ctx, pool, cfg.relay())
}

// setupWAL is SetupWAL for a configuration with its defaults.
func setupWAL(ctx context.Context, pool *pgxpool.Pool, cfg relayConfig) error {
	return withSetupLock(ctx, pool, cfg, func(conn *pgxpool.Conn, q *outboxdb.Queries) error {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", cfg.Publication).Scan(&exists); err != nil {
			return fmt.Errorf("outbox: looking up publication %s: %w", cfg.Publication, err)
		}
		if !exists {
			sql := fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')",
				pgx.Identifier{cfg.Publication}.Sanitize(), pgx.Identifier{cfg.Table}.Sanitize())
			if _, err := conn.Exec(ctx, sql); err != nil && !isDuplicate(err) {
				return fmt.Errorf("outbox: creating publication %s (the role must own %s): %w", cfg.Publication, cfg.Table, err)
			}
		}
		if err := q.InitWALReader(ctx, cfg.Slot); err != nil {
			return fmt.Errorf("outbox: recording the reader of slot %s: %w", cfg.Slot, err)
		}
		return ensureSlot(ctx, conn, q, cfg, false)
	})
}

// withSetupLock runs f on a connection holding the advisory lock that
// serialises the setups of cfg's slot (relays starting at once, a reader
// recreating the slot).
func withSetupLock(ctx context.Context, pool *pgxpool.Pool, cfg relayConfig, f func(*pgxpool.Conn, *outboxdb.Queries) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("outbox: setting up the WAL relay: %w", err)
	}
	defer conn.Release()
	key := "outbox_wal_setup:" + cfg.Slot
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", key); err != nil {
		return fmt.Errorf("outbox: locking the WAL setup: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1))", key) //nolint:errcheck
	return f(conn, outboxdb.New(withTable(conn, cfg.Table, new(sync.Map))))
}

// ensureSlot creates the slot when it is missing, and drops and creates it
// again when it was invalidated, with the hand-over protocol: the hand-over
// is marked due first, and recorded under the next generation once the slot
// exists; a hand-over left due by a setup that died in between is recorded
// now. Unless reader (the caller holds the reader lease), a missing or
// invalidated slot is left to the relay that holds the lease, if any. The
// caller holds the setup lock.
func ensureSlot(ctx context.Context, conn *pgxpool.Conn, q *outboxdb.Queries, cfg relayConfig, reader bool) error {
	var sameDatabase, lost bool
	err := conn.QueryRow(ctx, `SELECT database = current_database(), COALESCE(wal_status = 'lost', false)
		FROM pg_replication_slots WHERE slot_name = $1`, cfg.Slot).Scan(&sameDatabase, &lost)
	missing := errors.Is(err, pgx.ErrNoRows)
	switch {
	case err != nil && !missing:
		return fmt.Errorf("outbox: looking up replication slot %s: %w", cfg.Slot, err)
	case !missing && !sameDatabase:
		return fmt.Errorf("outbox: replication slot %s belongs to another database: choose another WALConfig.Slot", cfg.Slot)
	}
	state, err := q.WALReaderState(ctx, cfg.Slot)
	if err != nil {
		return fmt.Errorf("outbox: reading the reader row of slot %s: %w", cfg.Slot, err)
	}
	if (missing || lost) && !reader && state.Leased {
		return nil // the reader recreates it
	}
	if missing || lost {
		if err := q.MarkWALHandoverDue(ctx, cfg.Slot); err != nil {
			return fmt.Errorf("outbox: marking the hand-over of slot %s due: %w", cfg.Slot, err)
		}
		if lost {
			if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", cfg.Slot); err != nil {
				return fmt.Errorf("outbox: dropping the invalidated replication slot %s: %w", cfg.Slot, err)
			}
		}
		if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", cfg.Slot); err != nil && !isDuplicate(err) {
			return fmt.Errorf("outbox: creating replication slot %s (the role needs REPLICATION): %w", cfg.Slot, err)
		}
	} else if !state.HandoverDue {
		return nil
	}
	if _, err := q.RecordWALHandover(ctx, cfg.Slot); err != nil {
		return fmt.Errorf("outbox: recording the WAL hand-over of slot %s: %w", cfg.Slot, err)
	}
	return nil
}

// DropWAL drops the WAL relay's replication slot and publication, if they
// exist. A slot nobody reads keeps all the server's WAL from its position
// on: drop it when the WAL relay is retired. It fails while a reader is
// connected to the slot.
func DropWAL(ctx context.Context, pool *pgxpool.Pool, walCfg WALConfig) error {
	cfg := walCfg.relay()
	if _, err := pool.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", cfg.Slot); err != nil {
		return fmt.Errorf("outbox: dropping replication slot %s: %w", cfg.Slot, err)
	}
	if _, err := pool.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{cfg.Publication}.Sanitize()); err != nil {
		return fmt.Errorf("outbox: dropping publication %s: %w", cfg.Publication, err)
	}
	return nil
}

func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505")
}

// slotInUse reports PostgreSQL's refusal of a second consumer on a slot
// (object_in_use: "replication slot … is active for PID …"): the previous
// reader's walsender has not gone yet.
func slotInUse(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}

// missingOrInvalid reports PostgreSQL's refusal to stream a slot that does
// not exist (undefined_object) or was invalidated (object_not_in_prerequisite_state).
func missingOrInvalid(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42704" || pgErr.Code == "55000")
}
