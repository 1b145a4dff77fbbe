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
// of the outbox table's INSERTs (Config.Publication), the logical
// replication slot that decodes it with pgoutput (Config.Slot), and the
// slot's row in <table>_wal_readers (migration 5), which holds the reader
// lease and the hand-over.
//
// A slot streams only the transactions that commit after it was created.
// Events committed before — a backlog left by the polling relay, say — are
// not in its stream: SetupWAL records, right after it creates the slot, the
// highest pending id and the time, and the WAL relay publishes the events
// still pending within those bounds (the hand-over) before it starts
// streaming. A transaction in flight while the slot was created may be both
// handed over and streamed: a duplicate, never a loss. Create the slot
// before the events it should see are committed, and while no polling
// relay runs (the two modes must not run at once).
//
// pool must connect as a role that may create publications on the table
// (its owner) and replication slots (the REPLICATION attribute, or a
// superuser). SetupWAL is safe to call from several relays at once and at
// every start.
func SetupWAL(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("outbox: invalid config: %w", err)
	}
	cfg.withNames()
	// Serialise concurrent setups (several relays starting at once).
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("outbox: setting up the WAL relay: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", "paylab_outbox_wal:"+cfg.Slot); err != nil {
		return fmt.Errorf("outbox: locking the WAL setup: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1))", "paylab_outbox_wal:"+cfg.Slot) //nolint:errcheck

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
	var database string
	err = conn.QueryRow(ctx, "SELECT database FROM pg_replication_slots WHERE slot_name = $1", cfg.Slot).Scan(&database)
	created := false
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", cfg.Slot); err != nil {
			if !isDuplicate(err) {
				return fmt.Errorf("outbox: creating replication slot %s (the role needs REPLICATION): %w", cfg.Slot, err)
			}
		} else {
			created = true
		}
	case err != nil:
		return fmt.Errorf("outbox: looking up replication slot %s: %w", cfg.Slot, err)
	default:
		var current string
		if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&current); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		if database != current {
			return fmt.Errorf("outbox: replication slot %s belongs to database %s, not %s: choose another Config.Slot", cfg.Slot, database, current)
		}
	}
	q := outboxdb.New(withTable(conn, cfg.Table, new(sync.Map)))
	if created {
		err = q.ResetWALHandover(ctx, cfg.Slot)
	} else {
		err = q.InitWALReader(ctx, cfg.Slot)
	}
	if err != nil {
		return fmt.Errorf("outbox: recording the WAL hand-over of slot %s: %w", cfg.Slot, err)
	}
	return nil
}

// DropWAL drops the WAL relay's replication slot and publication, if they
// exist. A slot nobody reads keeps all the server's WAL from its position
// on: drop it when the WAL relay is retired. It fails while a reader is
// connected to the slot.
func DropWAL(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	cfg.withNames()
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
